"""broker.reset() with clients still connected: a live kafka-python group and a confluent-kafka
producer mid-transaction. The reset forgets both at once, the clients get Kafka's ordinary
answers (and recover), and the next test on the same broker finds a clean one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_python_groups import close_all
from quick_clients import RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.inspection import GroupView, TransactionView
from kafkapy.protocol.api_keys import ApiKey
from tests.inspection.test_coordinator_views import PARTITIONS, TOPIC, KafkaPythonMember

TIMEOUT_S = 20
MEMBER_APIS = (ApiKey.HEARTBEAT, ApiKey.SYNC_GROUP, ApiKey.OFFSET_COMMIT)
HISTORY = "kafkapy.observers.RequestHistory"
SEED = {TOPIC: {"partitions": PARTITIONS,
                "records": [{"value": "x", "partition": p} for p in range(PARTITIONS)]}}


@pytest.fixture(scope="module")
def shared() -> Iterator[Broker]:
    with Broker({"observer.class.names": HISTORY}) as broker:
        yield broker


@pytest.fixture
def fresh(shared: Broker) -> Iterator[Broker]:
    shared.seed(SEED)
    yield shared
    shared.reset()


def reset_and_look(broker: Broker) -> tuple[list[GroupView], list[TransactionView], list[str]]:
    """Reset, and look at once on the broker's loop, before any client can come back."""
    async def run() -> tuple[list[GroupView], list[TransactionView], list[str]]:
        await broker.reset_async()
        topics = [name for name in broker._running().cluster.topics if not name.startswith("__")]
        return broker.groups(), broker.transactions(), topics
    result: tuple[list[GroupView], list[TransactionView], list[str]] = broker._from_thread(run())
    return result


def test_reset_forgets_a_live_group_and_an_open_transaction(fresh: Broker) -> None:
    from confluent_kafka import KafkaException, Producer

    members = [KafkaPythonMember(fresh, "live") for _ in range(2)]
    warm_transaction_coordinator(fresh.bootstrap_servers)
    producer = Producer({"bootstrap.servers": fresh.bootstrap_servers, "transactional.id": "live-tx",
                         "linger.ms": 0, **RDKAFKA_CLIENT})
    try:
        before = fresh.wait_for_sync(lambda: fresh.group("live"),
                                     lambda v: v is not None and v.state == "Stable" and len(v.members) == 2
                                     and len(v.offsets) == PARTITIONS,
                                     timeout=TIMEOUT_S, what="a stable group of two, its offsets committed")
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"in-flight", partition=1)
        assert producer.flush(TIMEOUT_S) == 0
        assert fresh.transaction("live-tx").state == "Ongoing"  # type: ignore[union-attr]
        since = fresh.history()[-1].time

        assert reset_and_look(fresh) == ([], [], [])

        # the producer's commit is refused as for an id the coordinator does not know
        with pytest.raises(KafkaException):
            producer.commit_transaction(TIMEOUT_S)
        ends = [e for e in fresh.history(since=since) if e.api_key == ApiKey.END_TXN]
        assert ends and ends[0].error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # the members hear UNKNOWN_MEMBER_ID, join again and form the group anew (new member ids, no
        # offsets; kafka-python's Metadata makes the topic again, empty, so nothing is committed)
        fresh.wait_for_sync(lambda: [e.error_code for e in fresh.history(since=since)
                                     if e.api_key in MEMBER_APIS],
                            lambda codes: ErrorCode.UNKNOWN_MEMBER_ID in codes, timeout=TIMEOUT_S,
                            what="a member told it is unknown")
        again = fresh.wait_for_sync(lambda: fresh.group("live"),
                                    lambda v: v is not None and v.state == "Stable" and len(v.members) == 2,
                                    timeout=TIMEOUT_S, what="the group formed again")
        assert before is not None and again is not None and again.offsets == ()
        assert not {m.member_id for m in again.members} & {m.member_id for m in before.members}
    finally:
        close_all(members)


def test_the_next_test_finds_a_clean_broker_and_uses_it(fresh: Broker) -> None:
    from confluent_kafka import Producer

    assert fresh.groups() == [] and fresh.transactions() == []
    warm_transaction_coordinator(fresh.bootstrap_servers)
    producer = Producer({"bootstrap.servers": fresh.bootstrap_servers, "transactional.id": "live-tx",
                         "linger.ms": 0, **RDKAFKA_CLIENT})
    producer.init_transactions(TIMEOUT_S)
    [txn] = fresh.transactions()
    assert (txn.state, txn.producer_epoch) == ("Empty", 0)  # a new producer id, not a bumped epoch
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"fresh", partition=1)
    producer.commit_transaction(TIMEOUT_S)
    assert fresh.transaction("live-tx").state == "CompleteCommit"  # type: ignore[union-attr]
    assert [r.value for r in fresh.records(TOPIC, 1) if not r.is_control] == [b"x", b"fresh"]

    members = [KafkaPythonMember(fresh, "live") for _ in range(2)]
    try:
        view = fresh.wait_for_sync(lambda: fresh.group("live"),
                                   lambda v: v is not None and v.state == "Stable" and len(v.members) == 2
                                   and sorted(p for m in members for p in m.parts) == list(range(PARTITIONS)),
                                   timeout=TIMEOUT_S, what="the group formed on the clean broker")
    finally:
        close_all(members)
    assert view is not None
    assert sorted(p for m in view.members for p in m.assignment[TOPIC]) == list(range(PARTITIONS))


def test_a_snapshot_brings_back_a_groups_offsets_and_nothing_else(fresh: Broker) -> None:
    members = [KafkaPythonMember(fresh, "snapped") for _ in range(2)]
    try:
        before = fresh.wait_for_sync(lambda: fresh.group("snapped"),
                                     lambda v: v is not None and v.state == "Stable" and len(v.members) == 2
                                     and len(v.offsets) == PARTITIONS,
                                     timeout=TIMEOUT_S, what="a stable group of two, its offsets committed")
        snapshot = fresh.snapshot()
    finally:
        close_all(members)
    assert before is not None and snapshot.offsets == {"snapped": before.committed()}
    fresh.restore(snapshot)
    [restored] = fresh.groups()
    assert (restored.group_id, restored.state, restored.members) == ("snapped", "Empty", ())
    assert (restored.generation, restored.protocol_type) == (0, "")  # as a standalone committer's
    assert restored.committed() == before.committed() and restored.pending_offsets == ()
