"""An exactly-once test's controls over HTTP, with real clients: fault rules by transactional id
and by group, moving the coordinator of a transactional id or a group, and a partition's log
offsets. Each answer is checked against the OpenAPI document (``Checked``) and against the
Broker method it is the JSON form of."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from quick_clients import RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy.embedded import Broker

from .conftest import HISTORY, ControlClient
from .test_control_openapi import Checked

TIMEOUT_S = 30
TOPIC = "orders"


@pytest.fixture
def cluster() -> Iterator[tuple[Broker, Checked]]:
    with Broker(HISTORY, brokers=2, control="127.0.0.1:0") as broker:
        assert broker.control is not None
        checked = Checked(ControlClient(broker.control.url))
        checked.call("POST", "/seed", body={TOPIC: {"partitions": 1, "records": [{"value": "v0"}]}})
        warm_transaction_coordinator(broker.bootstrap_servers)
        yield broker, checked


def transactional_producer(broker: Broker, transactional_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({**RDKAFKA_CLIENT, "bootstrap.servers": broker.bootstrap_servers,
                                         "transactional.id": transactional_id, "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    return producer


def commit_one(broker: Broker, producer: confluent_kafka.Producer, value: bytes, group: str) -> None:
    producer.begin_transaction()
    producer.produce(TOPIC, value=value, partition=0)
    reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 1)], reader.consumer_group_metadata(),
                                             TIMEOUT_S)
    finally:
        reader.close()
    producer.commit_transaction(TIMEOUT_S)


def test_fault_rules_by_transactional_id_and_group_over_http(cluster: tuple[Broker, Checked]) -> None:
    broker, checked = cluster
    status, by_id = checked.call("POST", "/faults", body={
        "api": "EndTxn", "transactional_id": "payments", "times": 1,
        "action": {"type": "error", "error": "CONCURRENT_TRANSACTIONS"}})
    assert status == 201 and by_id["rule"]["transactional_id"] == "payments"
    status, by_group = checked.call("POST", "/faults", body={"group": "payments-readers",
                                                             "action": {"type": "delay", "seconds": 0}})
    assert status == 201 and by_group["rule"]["group"] == "payments-readers"
    commit_one(broker, transactional_producer(broker, "billing"), b"billing", "billing-readers")
    assert checked.call("GET", "/faults/{id}", f"/faults/{by_id['id']}")[1]["matched"] == 0
    assert checked.call("GET", "/faults/{id}", f"/faults/{by_group['id']}")[1]["matched"] == 0
    commit_one(broker, transactional_producer(broker, "payments"), b"payments", "payments-readers")
    fault = checked.call("GET", "/faults/{id}", f"/faults/{by_id['id']}")[1]
    assert (fault["fired"], fault["matched"]) == (1, 2)  # librdkafka retried the EndTxn
    # AddOffsetsToTxn, TxnOffsetCommit carry the group; none of billing's did
    assert checked.call("GET", "/faults/{id}", f"/faults/{by_group['id']}")[1]["matched"] >= 2
    committed = [r.value for r in broker.records(TOPIC, isolation="read_committed")]
    assert committed == [b"v0", b"billing", b"payments"]


@pytest.mark.parametrize(("rule", "message"), [
    ({"transactional_id": 7}, "transactional_id: expected text, not 7"),
    ({"group": ["workers"]}, "group: expected text, not ['workers']"),
    ({"api": "Fetch", "group": "workers"},
     "group: no request of FETCH carries one, so the rule would match nothing"),
    ({"groups": "workers"}, "unknown field(s) groups; a rule takes "),
])
def test_a_bad_id_criterion_is_one_line(cluster: tuple[Broker, Checked], rule: dict[str, object],
                                        message: str) -> None:
    _, checked = cluster
    status, answer = checked.call("POST", "/faults", body={**rule, "action": {"type": "stall"}})
    assert status == 400 and answer["error"].startswith(message) and "\n" not in answer["error"]
