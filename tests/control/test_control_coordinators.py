"""Groups and transactions over HTTP, as real clients left them: a kafka-python member's
subscription, assignment and committed offsets in ``GET /groups/{group}``; a confluent-kafka
transactional producer's open, then committed, transaction in ``GET /transactions/{id}``. Each
answer is checked against the OpenAPI document (``Checked``) and against ``broker.groups()`` /
``broker.transactions()``, whose JSON form it is."""

from __future__ import annotations

from kafka_python_groups import poll_until_assigned, subscribe_when_seen
from quick_clients import KAFKA_PYTHON_CLIENT, RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy.control.coordinators_json import view_json
from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

from .test_control_openapi import Checked

TIMEOUT_S = 30


def test_a_kafka_python_group_as_json(controlled_cluster: tuple[Broker, Checked]) -> None:
    from kafka import KafkaConsumer, TopicPartition

    broker, checked = controlled_cluster
    checked.call("POST", "/seed", body={"jobs": {"partitions": 2}})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="workers",
                             client_id="worker-1", enable_auto_commit=False, auto_offset_reset="earliest",
                             **KAFKA_PYTHON_CLIENT)
    try:
        subscribe_when_seen(consumer, "jobs", TIMEOUT_S)  # both against kafka-python's stranded rejoin
        poll_until_assigned(consumer, 2, TIMEOUT_S)
        consumer.commit({TopicPartition("jobs", 0): _offset(1)})
        status, group = checked.call("GET", "/groups/{group}", "/groups/workers")
        assert status == 200
        assert (group["group_id"], group["kind"], group["state"]) == ("workers", "classic", "Stable")
        [member] = group["members"]
        assert (member["client_id"], member["subscription"], member["assignment"]) == \
            ("worker-1", ["jobs"], {"jobs": [0, 1]})
        assert [(o["topic"], o["partition"], o["offset"]) for o in group["offsets"]] == [("jobs", 0, 1)]
        view = broker.group("workers")
        assert view is not None and group == view_json(view)
        status, listed = checked.call("GET", "/groups")
        assert status == 200 and listed == {"groups": [group]}
    finally:
        consumer.close()


def _offset(offset: int) -> object:
    from kafka.structs import OffsetAndMetadata

    return OffsetAndMetadata(offset, "", -1)


def test_a_confluent_transaction_as_json(controlled_cluster: tuple[Broker, Checked]) -> None:
    from confluent_kafka import Producer

    broker, checked = controlled_cluster
    checked.call("POST", "/seed", body={"orders": {"partitions": 1}})
    warm_transaction_coordinator(broker.bootstrap_servers)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "t1",
                         **RDKAFKA_CLIENT})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("orders", b"in a transaction", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    status, open_one = checked.call("GET", "/transactions/{id}", "/transactions/t1")
    assert status == 200
    assert (open_one["state"], open_one["partitions"], open_one["timeout_ms"]) == \
        ("Ongoing", [["orders", 0]], 60_000)  # librdkafka's transaction.timeout.ms
    producer.commit_transaction(TIMEOUT_S)
    wait_until(lambda: checked.call("GET", "/transactions/{id}", "/transactions/t1")[1]["state"] ==
               "CompleteCommit", what="the commit")
    status, listed = checked.call("GET", "/transactions")
    assert status == 200 and [t["transactional_id"] for t in listed["transactions"]] == ["t1"]
    assert listed["transactions"] == [view_json(view) for view in broker.transactions()]
    assert listed["transactions"][0]["partitions"] == []
