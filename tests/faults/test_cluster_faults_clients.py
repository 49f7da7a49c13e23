"""Cluster faults as real clients meet them: a leader moved mid-stream (confluent-kafka's
idempotent producer, kafka-python's consumer), a coordinator cut off for a while (a kafka-python
group), a session ended now (a two-member kafka-python group). Every wait is on a condition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_python_groups import PolledMember, close_all, subscribe_when_seen
from quick_clients import KAFKA_PYTHON_CLIENT, KAFKA_PYTHON_CONSUMER, prompt_producer_id

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups import GroupsModule
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

TIMEOUT_S = 30
HISTORY = {"observer.class.names": "kafkapy.observers.RequestHistory"}


def groups_of(broker: Broker) -> GroupsModule:
    """The group coordinator of a single broker, to read a group's generation and members."""
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))


def classic(broker: Broker, group: str) -> tuple[int, dict[str, str], str]:
    """(generation, member id -> client id, state) of a classic group as its coordinator holds it."""
    found = groups_of(broker).coordinator.groups.get(group)
    if found is None:
        return 0, {}, "Dead"
    clients = {member_id: member.client_id for member_id, member in found.members.items()}
    return found.generation_id, clients, found.state.value


# --- a leader moved mid-stream ------------------------------------------------------------------------

@pytest.fixture
def cluster() -> Iterator[Broker]:
    with Broker(HISTORY, brokers=3) as running:
        yield running


def test_an_idempotent_producer_follows_a_moved_leader_and_delivers_once_in_order(cluster: Broker) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    cluster.seed({"stream": {"partitions": 1}})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 5, "retry.backoff.ms": 10})
    prompt_producer_id(producer, "stream")
    reports: list[Any] = []

    def send(start: int, count: int) -> None:
        for i in range(start, start + count):
            producer.produce("stream", value=b"%d" % i, partition=0,
                             on_delivery=lambda err, msg: reports.append(err))
            producer.poll(0)

    send(0, 50)
    assert producer.flush(TIMEOUT_S) == 0
    first = cluster.brokers[0].runtime
    assert first is not None
    old_leader, old_epoch = first.cluster.leadership("stream", 0) or (-1, -1)
    to = (old_leader + 1) % 3

    move = cluster.move_leader("stream", 0, to=to)
    send(50, 50)  # the producer still believes the old leader: it is refused and finds the new one
    assert producer.flush(TIMEOUT_S) == 0

    assert (move.previous_leader, move.leader, move.leader_epoch) == (old_leader, to, old_epoch + 1)
    assert reports == [None] * 100
    stored = cluster.records("stream")
    assert [r.value for r in stored] == [b"%d" % i for i in range(100)]  # all, once, in order
    assert len({r.producer_id for r in stored}) == 1 and [r.sequence for r in stored] == list(range(100))
    old = next(m for m in cluster.brokers if m.broker_id == old_leader)
    refused = [e for e in old.history() if e.api_key == ApiKey.PRODUCE and e.error_code != ErrorCode.NONE]
    assert refused and {e.error_code for e in refused} == {ErrorCode.NOT_LEADER_OR_FOLLOWER}
    new = next(m for m in cluster.brokers if m.broker_id == to)
    assert any(e.api_key == ApiKey.PRODUCE and e.error_code == ErrorCode.NONE for e in new.history())

    # A consumer that reads across a second move (back to the first leader) sees each record once.
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                             enable_auto_commit=False, **KAFKA_PYTHON_CLIENT)
    try:
        consumer.assign([TopicPartition("stream", 0)])
        seen: list[bytes] = []

        def read(count: int) -> bool:
            for records in consumer.poll(200).values():
                seen.extend(r.value for r in records)
            return len(seen) >= count
        wait_until(lambda: read(100), TIMEOUT_S, what="the first 100 records")
        back = cluster.move_leader("stream", 0, to=old_leader)
        send(100, 20)
        assert producer.flush(TIMEOUT_S) == 0
        wait_until(lambda: read(120), TIMEOUT_S, what="the 20 produced after the second move")
    finally:
        consumer.close()
    assert back.leader_epoch == old_epoch + 2
    assert seen == [b"%d" % i for i in range(120)]


# --- a coordinator cut off for a while --------------------------------------------------------------

@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({**HISTORY, "group.min.session.timeout.ms": 500}) as running:
        yield running


class Member(PolledMember):
    """A kafka-python consumer polled on a thread of its own (kafka_python_groups.PolledMember),
    subscribed once its metadata has the topic."""

    def __init__(self, broker: Broker, group: str, topic: str, client_id: str, **extra: Any) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                 client_id=client_id, auto_offset_reset="earliest",
                                 enable_auto_commit=False, **{**KAFKA_PYTHON_CONSUMER, **extra})
        subscribe_when_seen(consumer, topic, TIMEOUT_S)
        super().__init__(consumer)


def committed_offset(broker: Broker, group: str, topic: str) -> int | None:
    found = groups_of(broker).coordinator.offsets.get(group, topic, 0)
    return None if found is None else int(found.offset)


def test_a_group_survives_its_coordinator_being_unavailable_then_rejoins_and_commits(broker: Broker) -> None:
    broker.seed({"events": {"partitions": 1, "records": [{"value": f"{i}"} for i in range(10)]}})
    # the group.min.session.timeout.ms of the fixture: the outage outlasts it in half a second
    member = Member(broker, "survivor", "events", "survivor-1", session_timeout_ms=500)
    try:
        broker.wait_for_sync(lambda: (committed_offset(broker, "survivor", "events"), len(member.seen),
                                      member.parts, classic(broker, "survivor"),
                                      [(round(e.time % 100, 3), e.api_name, e.api_version, e.error_code)
                                       for e in broker.history()[-40:]]),
                             lambda seen: seen[0] == 10, timeout=TIMEOUT_S,
                             what="the first ten records committed")
        generation, members, _ = classic(broker, "survivor")
        started = time.monotonic()
        with broker.coordinator_unavailable(group="survivor"):
            # The member's heartbeats are refused and its lookups find no coordinator; its
            # session (0.5 s; it heartbeats every 50 ms) runs out meanwhile, as it would behind a
            # real coordinator outage.
            broker.wait_for_sync(lambda: classic(broker, "survivor"), lambda seen: not seen[1],
                                 timeout=TIMEOUT_S, what="the member's session to run out")
            refused = broker.wait_for_sync(
                lambda: {e.api_key for e in broker.history(since=started)
                         if e.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE},
                lambda keys: ApiKey.FIND_COORDINATOR in keys, timeout=TIMEOUT_S,
                what="a FindCoordinator answered COORDINATOR_NOT_AVAILABLE")
        after, rejoined, state = broker.wait_for_sync(
            lambda: classic(broker, "survivor"), lambda seen: len(seen[1]) == 1 and seen[2] == "Stable",
            timeout=TIMEOUT_S, what="the member back in a stable group")
        broker.seed({"events": {"records": [{"value": f"{i}"} for i in range(10, 20)]}})
        wait_until(lambda: committed_offset(broker, "survivor", "events") == 20, TIMEOUT_S,
                   what="the records produced after the rejoin committed")
    finally:
        member.close()
    assert refused - {ApiKey.FIND_COORDINATOR}  # the coordinator refused it too (a heartbeat, a join, ...)
    assert after > generation and state == "Stable"
    assert list(rejoined.values()) == ["survivor-1"] and set(rejoined) != set(members)  # a new member id
    assert member.seen == [str(i).encode() for i in range(20)]  # each record read once


def test_a_consumer_waits_out_a_coordinator_that_is_loading(broker: Broker) -> None:
    """COORDINATOR_LOAD_IN_PROGRESS, deterministically: FindCoordinator names the coordinator, which
    answers that it is loading; kafka-python retries and joins once the load is over."""
    broker.seed({"loading": {"partitions": 1, "records": [{"value": "x"}]}})
    started = time.monotonic()
    outage = broker.coordinator_unavailable(group="patient", error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    member = Member(broker, "patient", "loading", "patient-1")
    try:
        loading = broker.wait_for_sync(
            lambda: [e for e in broker.history(since=started)
                     if e.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS],
            lambda seen: len(seen) >= 2, timeout=TIMEOUT_S,
            what="requests answered COORDINATOR_LOAD_IN_PROGRESS")
        assert member.seen == []
        outage.remove()
        wait_until(lambda: committed_offset(broker, "patient", "loading") == 1, TIMEOUT_S,
                   what="the record read and committed once loaded")
    finally:
        member.close()
    assert member.seen == [b"x"]
    found = [e for e in broker.history(since=started) if e.api_key == ApiKey.FIND_COORDINATOR]
    assert found and all(e.error_code == ErrorCode.NONE for e in found)  # the coordinator was named
    assert {e.api_key for e in loading} <= {ApiKey.JOIN_GROUP, ApiKey.OFFSET_FETCH, ApiKey.HEARTBEAT}


# --- a session ended now ----------------------------------------------------------------------------

def test_an_expired_member_of_two_makes_the_group_rebalance_at_once(broker: Broker) -> None:
    broker.seed({"pairs": {"partitions": 2}})
    first = Member(broker, "pair", "pairs", "first", session_timeout_ms=30000)
    second = Member(broker, "pair", "pairs", "second", session_timeout_ms=30000)
    try:
        def settled() -> tuple[int, dict[str, str], str]:
            return classic(broker, "pair")
        generation, members, _ = broker.wait_for_sync(
            settled, lambda seen: len(seen[1]) == 2 and seen[2] == "Stable", timeout=TIMEOUT_S,
            what="both members in a stable group")
        wait_until(lambda: first.parts and second.parts, TIMEOUT_S, what="a partition each")
        started = time.monotonic()

        expired = broker.expire_session("pair", client_id="first")

        after, rejoined, _ = broker.wait_for_sync(
            settled, lambda seen: seen[0] > generation and len(seen[1]) == 2 and seen[2] == "Stable",
            timeout=TIMEOUT_S, what="the group rebalanced with both members")
        elapsed = time.monotonic() - started
        wait_until(lambda: first.parts and second.parts and first.parts != second.parts, TIMEOUT_S,
                   what="a partition each again")
    finally:
        close_all([first, second])
    assert [members[m] for m in expired] == ["first"]
    assert after > generation  # both members are in the new generation (the group is Stable with both)
    assert elapsed < 10  # not the 30 s session timeout: the rebalance came at once
    by_client = {client: member_id for member_id, client in rejoined.items()}
    assert by_client["first"] not in members  # it rejoined as a new member
    assert by_client["second"] in members  # the other kept its member id, in the new generation
