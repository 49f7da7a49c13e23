"""Fault rules by transactional id and by group (FaultRule(transactional_id=..., group=...)) as
real clients meet them: a rule matches every request that carries its id, whichever API and
version carries it, and no request of another id; no ``when=`` on body shapes needed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import confluent_kafka
import pytest
from quick_clients import RDKAFKA_CLIENT, send_group_offsets, warm_transaction_coordinator

from kafkapy.embedded import Broker
from kafkapy.faults import ApiKey, Delay, ErrorAnswer, ErrorCode, FaultRule, RuleHandle

TIMEOUT_S = 30
TOPIC = "orders"

# What a confluent-kafka transactional producer sends that carries its transactional id.
TRANSACTIONAL = (ApiKey.FIND_COORDINATOR, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN,
                 ApiKey.PRODUCE, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.TXN_OFFSET_COMMIT, ApiKey.END_TXN)
# What an aiokafka group member sends that carries its group id.
GROUPED = (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
           ApiKey.OFFSET_FETCH, ApiKey.OFFSET_COMMIT, ApiKey.LEAVE_GROUP)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as running:
        running.seed({TOPIC: {"partitions": 1, "records": [{"value": f"v{i}"} for i in range(3)]}})
        yield running


def transaction(broker: Broker, transactional_id: str) -> None:
    """One consume-transform-produce round: produce, the group's offset in the transaction, commit."""
    producer = confluent_kafka.Producer({**RDKAFKA_CLIENT, "bootstrap.servers": broker.bootstrap_servers,
                                         "transactional.id": transactional_id, "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(TOPIC, value=transactional_id.encode(), partition=0)
    send_group_offsets(producer, broker.bootstrap_servers, f"{transactional_id}-readers", TOPIC, 3)
    producer.commit_transaction(TIMEOUT_S)


def matched(handles: dict[ApiKey, RuleHandle]) -> dict[str, int]:
    return {api.name: handle.matched for api, handle in handles.items()}


def test_a_transactional_id_rule_matches_every_request_of_that_id_and_none_of_another(broker: Broker) -> None:
    warm_transaction_coordinator(broker.bootstrap_servers)
    handles: dict[ApiKey, RuleHandle] = {
        api: broker.faults.add(FaultRule(Delay(0), api=api, transactional_id="payments"))
        for api in TRANSACTIONAL}
    transaction(broker, "billing")
    assert matched(handles) == dict.fromkeys(matched(handles), 0)
    transaction(broker, "payments")
    assert all(count > 0 for count in matched(handles).values()), matched(handles)
    committed = [r.value for r in broker.records(TOPIC, isolation="read_committed")]
    assert committed[3:] == [b"billing", b"payments"]


def test_a_transactional_id_rule_fails_that_producer_only_and_it_retries(broker: Broker) -> None:
    """CONCURRENT_TRANSACTIONS on AddPartitionsToTxn is retriable: payments' producer tries again
    and commits; billing's never meets the rule."""
    warm_transaction_coordinator(broker.bootstrap_servers)
    rule = FaultRule(ErrorAnswer(ErrorCode.CONCURRENT_TRANSACTIONS), transactional_id="payments", times=1,
                     api=ApiKey.ADD_PARTITIONS_TO_TXN)
    with broker.faults.injected(rule) as handle:
        transaction(broker, "billing")
        assert (handle.matched, handle.fired) == (0, 0)
        transaction(broker, "payments")
    assert handle.fired == 1 and handle.matched >= 2
    view = broker.transaction("payments")
    assert view is not None and view.state == "CompleteCommit"
    assert broker.group("payments-readers") is not None
    assert broker.group("payments-readers").committed() == {(TOPIC, 0): 3}  # type: ignore[union-attr]


async def consume_in_group(bootstrap_servers: str, group: str) -> list[bytes | None]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap_servers, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                heartbeat_interval_ms=100)
    await consumer.start()
    try:
        got: list[bytes | None] = []
        while len(got) < 3:
            batches = await consumer.getmany(timeout_ms=1000)
            got += [record.value for records in batches.values() for record in records]
        await consumer.commit()
        await asyncio.sleep(0.3)  # a heartbeat or two
        return got
    finally:
        await consumer.stop()


def test_a_group_rule_matches_every_request_of_that_group_and_none_of_another(broker: Broker) -> None:
    handles: dict[ApiKey, RuleHandle] = {
        api: broker.faults.add(FaultRule(Delay(0), api=api, group="workers")) for api in GROUPED}
    assert asyncio.run(consume_in_group(broker.bootstrap_servers, "idlers")) == [b"v0", b"v1", b"v2"]
    assert matched(handles) == dict.fromkeys(matched(handles), 0)
    asyncio.run(consume_in_group(broker.bootstrap_servers, "workers"))
    assert all(count > 0 for count in matched(handles).values()), matched(handles)


def test_a_group_rule_fails_that_groups_commit_only(broker: Broker) -> None:
    """aiokafka's commit meets the rule's error for its group only."""
    from aiokafka.errors import CommitFailedError, KafkaError

    rule = FaultRule(ErrorAnswer(ErrorCode.GROUP_AUTHORIZATION_FAILED), group="workers",
                     api=ApiKey.OFFSET_COMMIT)
    with broker.faults.injected(rule) as handle:
        asyncio.run(consume_in_group(broker.bootstrap_servers, "idlers"))
        assert handle.matched == 0
        with pytest.raises((CommitFailedError, KafkaError)):
            asyncio.run(consume_in_group(broker.bootstrap_servers, "workers"))
    assert handle.fired >= 1
    idlers, workers = broker.group("idlers"), broker.group("workers")
    assert idlers is not None and idlers.committed() == {(TOPIC, 0): 3}
    assert workers is None or workers.committed() == {}


def test_a_confluent_kip848_member_meets_a_group_rule_in_its_heartbeats(broker: Broker) -> None:
    handle = broker.faults.add(FaultRule(Delay(0), group="modern", api=ApiKey.CONSUMER_GROUP_HEARTBEAT))
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "modern",
                                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        got = []
        while len(got) < 3:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == [b"v0", b"v1", b"v2"] and handle.matched >= 2  # joined, and left on close
