"""librdkafka's KIP-848 consumer (``group.protocol=consumer``) against kafkapy's heartbeat handlers.

FindCoordinator and offsets come from a test-only scaffold (consumer_protocol_module.py) until the
group coordinator module is merged; what is under test is the heartbeat path: joins, the server
assignor's split, revoke-then-assign on a member leaving and joining, every record consumed once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from consumer_protocol_module import ConsumerProtocolModule

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_api = pytest.importorskip("confluent_kafka.admin")

PARTITIONS = 6
MESSAGES = 60
TIMEOUT_S = 30


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}, modules=[ConsumerProtocolModule]) as running:
        admin = admin_api.AdminClient({"bootstrap.servers": running.bootstrap_servers})
        for future in admin.create_topics([admin_api.NewTopic("t", PARTITIONS, 1)]).values():
            future.result(timeout=TIMEOUT_S)
        producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap_servers})
        for i in range(MESSAGES):
            producer.produce("t", value=b"m%d" % i, partition=i % PARTITIONS)
        assert producer.flush(TIMEOUT_S) == 0
        yield running


def module_of(broker: Broker) -> ConsumerProtocolModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, ConsumerProtocolModule))


def consumer(broker: Broker, name: str) -> Any:
    c = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": "g", "group.protocol": "consumer",
        "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["t"])
    return c


def poll_until(consumers: list[Any], done: Callable[[], bool], seen: dict[bytes, str]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out; assignments {[c.assignment() for c in consumers]}"
        for c in consumers:
            message = c.poll(0.05)
            if message is None or message.error():
                continue
            value = message.value()
            assert value not in seen, f"{value!r} consumed twice"
            seen[value] = c.memberid()
            c.commit(message=message, asynchronous=False)


def assigned(c: Any) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_three_librdkafka_consumers_split_six_partitions_and_take_over_a_leaver_s(broker: Broker) -> None:
    consumers = [consumer(broker, f"c{i}") for i in range(3)]
    seen: dict[bytes, str] = {}
    try:
        poll_until(consumers, lambda: sorted(len(assigned(c)) for c in consumers) == [2, 2, 2]
                   and len(seen) == MESSAGES, seen)
        assert set().union(*(assigned(c) for c in consumers)) == set(range(PARTITIONS))
        assert len(set(seen.values())) == 3, "every member consumed its own partitions"

        group = module_of(broker).handlers.groups.groups["g"]
        wait_until(lambda: group.state.value == "Stable", timeout=TIMEOUT_S, what="a stable group")

        leaver = consumers.pop()
        leaver.close()
        poll_until(consumers, lambda: sorted(len(assigned(c)) for c in consumers) == [3, 3], seen)
        assert set().union(*(assigned(c) for c in consumers)) == set(range(PARTITIONS))

        consumers.append(consumer(broker, "c3"))
        poll_until(consumers, lambda: sorted(len(assigned(c)) for c in consumers) == [2, 2, 2], seen)
        assert set().union(*(assigned(c) for c in consumers)) == set(range(PARTITIONS))
        assert len(seen) == MESSAGES
    finally:
        for c in consumers:
            c.close()
