"""An exactly-once test's controls over HTTP, with real clients: fault rules by transactional id
and by group, moving the coordinator of a transactional id or a group, and a partition's log
offsets. Each answer is checked against the OpenAPI document (``Checked``) and against the
Broker method it is the JSON form of."""

from __future__ import annotations

import confluent_kafka
import pytest
from quick_clients import RDKAFKA_CLIENT, send_group_offsets, warm_transaction_coordinator

from kafkapy.control.coordinators_json import view_json
from kafkapy.embedded import Broker
from kafkapy.groups.partitioning import offsets_partition_for
from kafkapy.transactions.coordinator import transaction_partition_for

from .test_control_openapi import Checked

TIMEOUT_S = 30
TOPIC = "orders"


@pytest.fixture
def cluster(controlled_cluster: tuple[Broker, Checked]) -> tuple[Broker, Checked]:
    """The two brokers with one record in orders and the transaction coordinator made."""
    broker, checked = controlled_cluster
    checked.call("POST", "/seed", body={TOPIC: {"partitions": 1, "records": [{"value": "v0"}]}})
    warm_transaction_coordinator(broker.bootstrap_servers)
    return controlled_cluster


def transactional_producer(broker: Broker, transactional_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({**RDKAFKA_CLIENT, "bootstrap.servers": broker.bootstrap_servers,
                                         "transactional.id": transactional_id, "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    return producer


def open_transaction(producer: confluent_kafka.Producer, value: bytes) -> None:
    producer.begin_transaction()
    producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def commit_one(broker: Broker, producer: confluent_kafka.Producer, value: bytes, group: str) -> None:
    open_transaction(producer, value)
    send_group_offsets(producer, broker.bootstrap_servers, group, TOPIC, 1)
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


def test_a_transaction_and_a_group_coordinator_moved_over_http(cluster: tuple[Broker, Checked]) -> None:
    broker, checked = cluster
    producer = transactional_producer(broker, "payments")
    open_transaction(producer, b"paid")
    status, view = checked.call("GET", "/transactions/{id}", "/transactions/payments")
    assert status == 200 and view["state"] == "Ongoing"
    assert view["state_partition"] == transaction_partition_for("payments", 50)  # Kafka's default count
    to = 1 - view["coordinator"]  # brokers 0 and 1
    status, move = checked.call("POST", "/transactions/{id}/coordinator",
                                "/transactions/payments/coordinator", {"broker_id": to})
    assert status == 200
    assert (move["topic"], move["partition"], move["previous_leader"], move["leader"]) == \
        ("__transaction_state", view["state_partition"], view["coordinator"], to)
    again = checked.call("POST", "/transactions/{id}/coordinator", "/transactions/payments/coordinator",
                         {"broker_id": to})
    assert again[0] == 409 and again[1]["error"].startswith("ELECTION_NOT_NEEDED: ")
    producer.commit_transaction(TIMEOUT_S)
    status, done = checked.call("GET", "/transactions/{id}", "/transactions/payments")
    assert (done["state"], done["coordinator"]) == ("CompleteCommit", to)
    assert done == view_json(broker.transaction("payments"))

    commit_one(broker, producer, b"more", "payers")  # the group's offsets land at its coordinator
    status, group = checked.call("GET", "/groups/{group}", "/groups/payers")
    assert status == 200 and group["state_partition"] == offsets_partition_for("payers", 50)
    status, move = checked.call("POST", "/groups/{group}/coordinator", "/groups/payers/coordinator",
                                {"broker_id": 1 - group["coordinator"]})
    assert status == 200
    assert (move["topic"], move["partition"]) == ("__consumer_offsets", group["state_partition"])
    status, moved = checked.call("GET", "/groups/{group}", "/groups/payers")
    assert moved["coordinator"] == move["leader"] and moved["offsets"] == group["offsets"]


def test_log_offsets_over_http_are_broker_log_offsets(cluster: tuple[Broker, Checked]) -> None:
    broker, checked = cluster
    producer = transactional_producer(broker, "payments")
    open_transaction(producer, b"aborted")
    producer.abort_transaction(TIMEOUT_S)
    open_transaction(producer, b"open")
    status, answer = checked.call("GET", "/topics/{topic}/offsets", f"/topics/{TOPIC}/offsets")
    assert status == 200
    [offsets] = answer["offsets"]
    # v0 at 0, the aborted record at 1 and its marker at 2, the open transaction's record at 3
    assert (offsets["log_start_offset"], offsets["last_stable_offset"], offsets["high_watermark"],
            offsets["log_end_offset"]) == (0, 3, 4, 4)
    assert [(t["first_offset"], t["last_offset"]) for t in offsets["aborted_transactions"]] == [(1, 2)]
    assert answer["offsets"] == [view_json(o) for o in broker.log_offsets(TOPIC)]
    one = checked.call("GET", "/topics/{topic}/offsets", f"/topics/{TOPIC}/offsets?partition=0")
    assert one == (200, answer)
    none = checked.call("GET", "/topics/{topic}/offsets", "/topics/not-made/offsets")
    assert none == (200, {"offsets": []})
    producer.commit_transaction(TIMEOUT_S)
    [committed] = checked.call("GET", "/topics/{topic}/offsets", f"/topics/{TOPIC}/offsets")[1]["offsets"]
    assert committed["last_stable_offset"] == committed["high_watermark"] == committed["log_end_offset"] == 5
