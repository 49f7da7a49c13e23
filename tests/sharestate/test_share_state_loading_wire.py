"""A broker restarted over a long __share_group_state partition (log.dirs) loads it in slices, as
Kafka's CoordinatorRuntime loads it in the background: another connection's requests are answered
while the load runs, and a real share consumer (confluent-kafka) gets its records once the
share-partition leader's state read, refused COORDINATOR_LOAD_IN_PROGRESS meanwhile and retried,
goes through."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker, _find_module
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC
from kafkapy.sharestate.module import ShareCoordinatorModule
from kafkapy.sharestate.state import StateBatch, coordinator_key
from kafkapy.store.memory import MemoryStore

ck = pytest.importorskip("confluent_kafka")

TOPIC = "jobs"
RECORDS = 60_000  # state records of another group: a load of seconds
VALUES = [f"job-{i}".encode() for i in range(10)]
SLICE_WAIT_LIMIT_S = 1.0  # against a load of seconds: an answer within this came between two slices


def config(log_dir: Path) -> dict[str, object]:
    # one partition of __consumer_offsets: made when the consumer comes, its 50 log dirs would
    # hold the loop for a while of their own
    return {"broker.id": 1, "log.dirs": str(log_dir), "share.coordinator.state.topic.num.partitions": 1,
            "offsets.topic.num.partitions": 1, "share.auto.offset.reset": "earliest"}


def module_of(broker: Broker) -> ShareCoordinatorModule:
    assert broker.runtime is not None
    module = _find_module(broker.runtime, ShareCoordinatorModule)
    assert module is not None
    return module


def fill(broker: Broker, topic_id: uuid.UUID) -> None:
    """RECORDS state records of a group nobody consumes with, through the coordinator's own writes."""
    coordinator = module_of(broker).coordinator
    key = ("filler", topic_id, 0)

    def write() -> None:
        coordinator.initialize(key, 0, 0)
        for n in range(RECORDS - 1):
            coordinator.write(key, 0, 0, 0, (StateBatch(n, n, 2, 1),))
    broker._on_loop(write)


@pytest.mark.slow
def test_a_long_state_partition_loads_while_others_are_served_and_a_share_consumer_waits(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkapy.sharestate.coordinator")
    store = MemoryStore()
    with Broker(config(tmp_path), store=store) as broker:
        broker.seed({TOPIC: {"partitions": 1, "records": [{"value": v.decode()} for v in VALUES]}})
        assert broker.runtime is not None
        topic_id = broker.runtime.cluster.topics[TOPIC].topic_id
        with SimpleClient(broker.bootstrap_servers) as client:  # makes __share_group_state
            key = coordinator_key(("filler", topic_id, 0))
            found = client.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": CoordinatorKeyType.SHARE,
                                                                "coordinator_keys": [key]})
            assert found["coordinators"][0]["error_code"] == ErrorCode.NONE
        fill(broker, topic_id)

    with Broker(config(tmp_path), store=store) as broker:  # the coordinator's shard starts empty
        coordinator = module_of(broker).coordinator
        with SimpleClient(broker.bootstrap_servers) as other:
            other.request(ApiKey.API_VERSIONS, 0, {})
            consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "workers",
                                         "share.acknowledgement.mode": "explicit"})
            consumer.subscribe([TOPIC])
            try:
                got: list[bytes] = []
                waits: list[float] = []
                deadline = time.monotonic() + 60
                while len(got) < len(VALUES) and time.monotonic() < deadline:
                    for message in consumer.poll(0.05):
                        if message.error() is None:
                            got.append(message.value())
                            consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
                    started = time.monotonic()
                    other.request(ApiKey.API_VERSIONS, 0, {})
                    waits.append(time.monotonic() - started)
            finally:
                consumer.close()
        # every ApiVersions of the other connection came back between two slices of the load
        # (the load in one go held the loop: one waited for all of it)
        assert max(waits) < SLICE_WAIT_LIMIT_S, (max(waits), len(waits))
        # the share-partition leader's read met the load in slices (answered
        # COORDINATOR_LOAD_IN_PROGRESS) and retried
        began = f"loading {SHARE_STATE_TOPIC}-0 at epoch"
        assert any(r.getMessage().startswith(began) for r in caplog.records)
        print(f"{len(waits)} ApiVersions while the consumer waited, the longest {max(waits) * 1000:.0f} ms")
        assert sorted(got) == sorted(VALUES)
        filler = coordinator.shard.states[("filler", topic_id, 0)]
        assert filler.batches == (StateBatch(0, RECORDS - 2, 2, 1),)  # all of it loaded
