"""A test-only module that owns partition logs, seeds them directly and serves Fetch from them.

Produce is built on another branch; until the two meet, these tests append batches themselves
(kafkapy.protocol.records.build_record_batch, or kafka-python's DefaultRecordBatchBuilder) and
real clients read them back through FetchHandler. It is a real Module, registered through the
assembly's module list (``Broker(modules=[SeededLogs])``), and it implements PartitionSource the
way kafkapy.dataplane.partitions will: leaders from the cluster view, logs from a LogManager.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from kafkapy.dataplane.fetch import FETCH_CONFIG_KEYS, FetchHandler
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log import LogManager
from kafkapy.log.base import PartitionLog
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import RecordLike, build_record_batch
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.server.services import BrokerServices

T = TypeVar("T")


class SeededLogs(Module):
    name = "seeded-logs"
    config_keys = FETCH_CONFIG_KEYS

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.logs = LogManager()
        self.epochs: dict[tuple[str, int], int] = {}
        self.watchers: dict[tuple[str, int], list[Callable[[], None]]] = {}
        self.fetch = FetchHandler(self, services)

    def apis(self) -> Mapping[int, ApiHandler]:
        return {ApiKey.FETCH: self.fetch.api(),
                ApiKey.PRODUCE: ApiHandler(VersionRange(3, 13), self.refuse_produce)}

    @staticmethod
    def refuse_produce(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """Produce is built on the dataplane branch. librdkafka fetches with magic-2 batches only
        once the broker advertises Produce v3 *and* Fetch v4 (its MsgVer2 feature), so this
        module advertises Produce and refuses every partition; these tests never produce."""
        return fit_body(ApiKey.PRODUCE, "response", ctx.api_version, {"responses": [
            {"name": topic.get("name"), "topic_id": topic.get("topic_id"), "partition_responses": [
                {"index": p["index"], "error_code": ErrorCode.INVALID_REQUEST, "base_offset": -1,
                 "error_message": "this test module serves Fetch only"}
                for p in topic["partition_data"]]}
            for topic in request.body["topic_data"]]})

    # --- PartitionSource ----------------------------------------------------------------------

    def leader_log(self, topic: str, partition: int) -> PartitionLog:
        info = self.services.cluster.topics.get(topic)
        if info is None or partition not in info.partitions:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        if info.partitions[partition][0] != self.services.broker_id:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition}")
        return self.logs.get_or_create(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.epochs.get((topic, partition), 0)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.services.cluster.topics.get(topic)
        return info.topic_id if info is not None else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topics = self.services.cluster.topics.values()
        return next((info.name for info in topics if info.topic_id == topic_id), None)

    def on_append(self, topic: str, partition: int, callback: Callable[[], None]) -> Callable[[], None]:
        callbacks = self.watchers.setdefault((topic, partition), [])
        callbacks.append(callback)
        return lambda: callbacks.remove(callback) if callback in callbacks else None

    # --- seeding (on the loop) ---------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, leader: int | None = None,
                     topic_id: uuid.UUID | None = None) -> uuid.UUID:
        leader_id = self.services.broker_id if leader is None else leader
        replicas = {p: (leader_id,) for p in range(partitions)}
        return self.services.store.create_topic(name, replicas, topic_id).topic_id

    def append_batch(self, topic: str, partition: int, batch: bytes | bytearray) -> int:
        """Store one magic-2 batch at the log end (its base offset rewritten: not under the CRC)."""
        log = self.leader_log(topic, partition)
        data = bytearray(batch)
        base = log.log_end_offset
        struct.pack_into(">q", data, 0, base)
        log.append(data)
        for callback in list(self.watchers.get((topic, partition), ())):
            callback()
        return base

    def append(self, topic: str, partition: int, records: Iterable[RecordLike], **options: Any) -> int:
        return self.append_batch(topic, partition, build_record_batch(records, **options))


class ResponseRecorder:
    """An observer (``observer.class.names=fetch_seeding.ResponseRecorder``) keeping the
    responses it is shown, to check what observers see of a response written in chunks."""

    responses: ClassVar[list[tuple[Any, int]]] = []

    def configure(self, configs: dict[str, Any]) -> None:
        ResponseRecorder.responses.clear()

    def record_request(self, *args: Any) -> None:
        pass

    def record_response(self, response: Any, api_version: int, correlation_id: int) -> None:
        ResponseRecorder.responses.append((response, api_version))

    def close(self, timeout: float) -> None:
        pass


def seeded(broker: Broker) -> SeededLogs:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, SeededLogs))


def on_loop(broker: Broker, call: Callable[[], T]) -> T:
    """Run ``call`` on the broker's loop thread (appends must fire on_append there) and return
    its result."""
    assert broker.runtime is not None

    async def run() -> T:
        return call()

    return asyncio.run_coroutine_threadsafe(run(), broker.runtime.loop).result(timeout=10)
