"""The topic the group client tests share: "t" with six partitions on a broker keeping its logs
under ``log.dirs``, filled by confluent-kafka (tests/groups' classic, consumer-protocol and
migration client tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkapy.embedded import Broker
from kafkapy.groups.module import GroupsModule

PARTITIONS = 6
MESSAGES = 60


def broker_settings(log_dirs: Path, **extra: Any) -> dict[str, Any]:
    """Three `__consumer_offsets` partitions: coordinators spread, the load kept short."""
    return {"broker.id": 1, "log.dirs": str(log_dirs), "offsets.topic.num.partitions": 3, **extra}


def create_topic(running: Broker, timeout_s: float) -> None:
    import confluent_kafka.admin  # imported here: the test files skip themselves without it

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": running.bootstrap_servers})
    for future in admin.create_topics([confluent_kafka.admin.NewTopic("t", PARTITIONS, 1)]).values():
        future.result(timeout=timeout_s)


def produce(running: Broker, prefix: bytes, timeout_s: float) -> None:
    """MESSAGES records over the partitions in turn, valued ``prefix`` + a number."""
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap_servers})
    for i in range(MESSAGES):
        producer.produce("t", value=prefix + b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(timeout_s) == 0


def groups_module(broker: Broker) -> GroupsModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))
