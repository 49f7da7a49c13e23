"""Seeding the real data plane's logs directly, for Fetch tests that need exact batches.

Real clients read back through the broker's own DataPlaneModule and FetchHandler; the tests
append batches themselves (kafkapy.protocol.records.build_record_batch, or kafka-python's
DefaultRecordBatchBuilder) when the point is what Fetch does with particular bytes, not Produce.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeVar

from kafkapy.dataplane import DataPlaneModule
from kafkapy.dataplane.fetch import FetchHandler
from kafkapy.embedded import Broker
from kafkapy.protocol.records import RecordLike, build_record_batch
from kafkapy.server.services import BrokerServices

T = TypeVar("T")


class Seeder:
    """Create topics and append batches on a running broker, through its data plane's registry."""

    def __init__(self, module: DataPlaneModule) -> None:
        self.module = module

    @property
    def services(self) -> BrokerServices:
        return self.module.services

    @property
    def fetch(self) -> FetchHandler:
        return self.module.fetch_handler

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.module.partitions.topic_id(topic)

    def has_waiters(self, topic: str, partition: int) -> bool:
        return self.module.partitions.has_waiters(topic, partition)

    def create_topic(self, name: str, partitions: int = 1, leader: int | None = None,
                     topic_id: uuid.UUID | None = None) -> uuid.UUID:
        leader_id = self.services.broker_id if leader is None else leader
        replicas = {p: (leader_id,) for p in range(partitions)}
        return self.services.store.create_topic(name, replicas, topic_id).topic_id

    def append_batch(self, topic: str, partition: int, batch: bytes | bytearray) -> int:
        """Store one magic-2 batch at the log end (its base offset rewritten: not under the CRC)."""
        registry = self.module.partitions
        log = registry.leader_log(topic, partition)
        data = bytearray(batch)
        base = log.log_end_offset
        struct.pack_into(">q", data, 0, base)
        log.append(data)
        registry.appended(topic, partition)
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


def seeded(broker: Broker) -> Seeder:
    assert broker.runtime is not None
    return Seeder(next(m for m in broker.runtime.modules if isinstance(m, DataPlaneModule)))


def on_loop(broker: Broker, call: Callable[[], T]) -> T:
    """Run ``call`` on the broker's loop thread (appends must fire on_append there) and return
    its result."""
    assert broker.runtime is not None

    async def run() -> T:
        return call()

    return asyncio.run_coroutine_threadsafe(run(), broker.runtime.loop).result(timeout=10)
