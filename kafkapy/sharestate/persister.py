"""How a share-partition leader reaches the share coordinator (Kafka's DefaultStatePersister and
PersisterStateManager): the key's coordinator is the leader of its ``__share_group_state``
partition; when that is this broker the coordinator is called in process, otherwise the request
goes to that broker over the inter-broker channel (kafkapy.server.broker_channel).

``__share_group_state`` is made first if need be (waited for on the store's watch). As Kafka's
PersisterStateManager, a request that meets a coordinator moving (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, an unreachable broker) is sent again
after a backoff on the broker's clock, for up to ``retry_ms``: a leader move that takes the state
partition's leader with it settles in that time. Any other error is the caller's, as KafkaApiError
with Kafka's code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.broker_channel import BrokerChannel
from kafkapy.sharestate.coordinator import ShareCoordinator
from kafkapy.sharestate.state import NO_EPOCH, SharePartitionKey, ShareStateValue, StateBatch

__all__ = ["RETRIABLE", "SharePersister"]

STATE_API_VERSION = 0
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_BACKOFF_S = 0.1  # Kafka's PersisterStateManager starts at 100 ms too
_RETRY_MS = 15_000


class SharePersister:
    """Initialize, read, write, summarize and delete one share-partition's state, wherever its
    coordinator is."""

    def __init__(self, coordinator: ShareCoordinator, broker_id: Callable[[], int],
                 locate: Callable[[SharePartitionKey], int | None], channel: BrokerChannel,
                 ensure_topic: Callable[[], Awaitable[bool]], retry_ms: int = _RETRY_MS) -> None:
        self._coordinator = coordinator
        self._broker_id = broker_id
        self._locate = locate  # the broker leading the key's state partition; None while there is none
        self._channel = channel
        self._ensure_topic = ensure_topic
        self._retry_ms = retry_ms

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        await self._call(key, lambda: self._coordinator.initialize(key, state_epoch, start_offset),
                         ApiKey.INITIALIZE_SHARE_GROUP_STATE,
                         {"partition": key[2], "state_epoch": state_epoch, "start_offset": start_offset})

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateValue:
        value: ShareStateValue = await self._call(
            key, lambda: self._coordinator.read(key, leader_epoch), ApiKey.READ_SHARE_GROUP_STATE,
            {"partition": key[2], "leader_epoch": leader_epoch})
        return value

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[StateBatch]) -> None:
        written = tuple(batches)
        await self._call(
            key, lambda: self._coordinator.write(key, state_epoch, leader_epoch, start_offset, written),
            ApiKey.WRITE_SHARE_GROUP_STATE,
            {"partition": key[2], "state_epoch": state_epoch, "leader_epoch": leader_epoch,
             "start_offset": start_offset,
             "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                               for b in batches]})

    async def summary(self, key: SharePartitionKey) -> ShareStateValue:
        value: ShareStateValue = await self._call(
            key, lambda: self._coordinator.summary(key, NO_EPOCH), ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            {"partition": key[2], "leader_epoch": NO_EPOCH})
        return value

    async def delete(self, key: SharePartitionKey) -> None:
        await self._call(key, lambda: self._coordinator.delete(key), ApiKey.DELETE_SHARE_GROUP_STATE,
                         {"partition": key[2]})

    async def _call(self, key: SharePartitionKey, here: Callable[[], Any], api_key: ApiKey,
                    partition: Mapping[str, Any]) -> Any:
        """``here()`` when this broker is the coordinator, the request to it otherwise; retried
        as the module docstring says."""
        if not await self._ensure_topic():
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "__share_group_state could not be made.")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._retry_ms / 1000
        while True:
            try:
                coordinator = self._locate(key)
                if coordinator is None:
                    raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "No share coordinator yet.")
                if coordinator == self._broker_id():
                    return here()
                return await self._remote(coordinator, key, api_key, partition)
            except KafkaApiError as refusal:
                if refusal.code not in RETRIABLE or loop.time() >= deadline:
                    raise
            await asyncio.sleep(_BACKOFF_S)

    async def _remote(self, broker_id: int, key: SharePartitionKey, api_key: ApiKey,
                      partition: Mapping[str, Any]) -> Any:
        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [partition]}]}
        answer = await self._channel.request(broker_id, api_key, STATE_API_VERSION, body)
        if answer is None:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"Broker {broker_id} did not answer.")
        try:
            row = answer["results"][0]["partitions"][0]
            code = ErrorCode(row["error_code"])
        except (IndexError, KeyError, TypeError, ValueError):
            raise KafkaApiError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Broker {broker_id} answered {api_key.name} without the partition.") from None
        if code != ErrorCode.NONE:
            raise KafkaApiError(code, row.get("error_message"))
        if api_key in (ApiKey.READ_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY):
            return ShareStateValue(
                snapshot_epoch=0, state_epoch=row["state_epoch"], leader_epoch=NO_EPOCH,
                start_offset=row["start_offset"],
                batches=tuple(StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"],
                                         b["delivery_count"]) for b in row.get("state_batches") or ()))
        return None
