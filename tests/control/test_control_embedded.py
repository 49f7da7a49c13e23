"""The control endpoint on an embedded broker, driven with a real HTTP client while real Kafka
clients meet what it set up: a fault added as JSON reaches kafka-python, seeded records reach
confluent-kafka, reset and records say what the logs hold, and bad requests are one-line 4xx
answers after which the endpoint goes on serving."""

from __future__ import annotations

import base64
import json
import sys
import time

import pytest
from quick_clients import KAFKA_PYTHON_CLIENT, RDKAFKA_CONSUMER

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.faults import ErrorAnswer, FaultRule
from kafkapy.protocol.api_keys import ApiKey

from .conftest import ControlClient

TIMEOUT_S = 30


Controlled = tuple[Broker, ControlClient]


def test_a_fault_added_as_json_reaches_a_kafka_python_producer(controlled: Controlled) -> None:
    from kafka import KafkaProducer
    from kafka.errors import PolicyViolationError

    broker, control = controlled
    assert control.call("POST", "/seed", {"events": {"partitions": 1}})[0] == 200
    rule = {"api": "Produce", "topic": "events", "times": 1,
            "action": {"type": "error", "error": "POLICY_VIOLATION"}}
    status, fault = control.call("POST", "/faults", rule)
    assert status == 201 and fault["rule"]["action"] == {"type": "error", "error": "POLICY_VIOLATION"}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0, acks="all",
                             request_timeout_ms=TIMEOUT_S * 1000, client_id="json-fault-producer",
                             **KAFKA_PYTHON_CLIENT)
    try:
        with pytest.raises(PolicyViolationError):
            producer.send("events", b"refused", partition=0).get(TIMEOUT_S)
        assert producer.send("events", b"written", partition=0).get(TIMEOUT_S).offset == 0  # times=1
    finally:
        producer.close(TIMEOUT_S)
    status, listed = control.call("GET", f"/faults/{fault['id']}")
    assert status == 200 and (listed["matched"], listed["fired"]) == (2, 1)
    assert [r.value for r in broker.records("events")] == [b"written"]
    status, history = control.call("GET", "/history?client_id=json-fault-producer")
    produced = [e for e in history["history"] if e["api"] == "Produce"]
    assert [e["error"] for e in produced] == ["POLICY_VIOLATION", "NONE"]
    assert control.call("DELETE", f"/faults/{fault['id']}")[0] == 200
    assert control.call("GET", "/faults") == (200, {"faults": []})


def test_seed_then_consume_with_confluent_kafka_then_reset(controlled: Controlled) -> None:
    from confluent_kafka import Consumer

    broker, control = controlled
    status, seeded = control.call("POST", "/seed", {"orders": {"partitions": 2, "records": [
        {"key": "o-1", "value": "first", "headers": {"source": "seed"}, "partition": 0},
        {"key": "o-2", "value": "second", "partition": 1}]}})
    assert (status, seeded) == (200, {"seeded": ["orders"], "records": 2})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "control-test",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **RDKAFKA_CONSUMER})
    try:
        consumer.subscribe(["orders"])
        seen: list[tuple[bytes | None, bytes | None, object]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append((message.key(), message.value(), message.headers()))
    finally:
        consumer.close()
    assert sorted(seen, key=repr) == [(b"o-1", b"first", [("source", b"seed")]), (b"o-2", b"second", None)]
    status, records = control.call("GET", "/topics/orders/records?partition=0")
    assert status == 200
    [record] = records["records"]
    assert (record["encoding"], record["key"], record["value"], record["headers"]) == \
        ("utf-8", "o-1", "first", [["source", "seed"]])
    assert control.call("POST", "/reset") == (200, {"reset": True})
    assert control.call("GET", "/topics/orders/records") == (200, {"records": []})
    assert broker.records("orders") == []


def test_records_give_bytes_that_are_not_text_as_base64(controlled: Controlled) -> None:
    broker, control = controlled
    broker.seed({"blobs": {"partitions": 1, "records": [{"key": "k", "value": b"\xff\x00binary"},
                                                        {"key": None, "value": "text"}]}})
    status, body = control.call("GET", "/topics/blobs/records")
    assert status == 200
    first, second = body["records"]
    assert first["encoding"] == "base64"
    assert base64.b64decode(first["key"]) == b"k" and base64.b64decode(first["value"]) == b"\xff\x00binary"
    assert (second["encoding"], second["key"], second["value"]) == ("utf-8", None, "text")
    status, body = control.call("GET", "/topics/blobs/records?encoding=base64&from_offset=1")
    assert [(r["offset"], r["encoding"], r["value"]) for r in body["records"]] == \
        [(1, "base64", base64.b64encode(b"text").decode())]


def test_records_of_a_partition_the_topic_has_not_are_404(controlled: Controlled) -> None:
    """What broker.records() raises, as the endpoint says it: a kafka-python producer's topic has
    one partition, so partition 1 is UNKNOWN_TOPIC_OR_PARTITION; a topic not made yet has none."""
    from kafka import KafkaProducer

    broker, control = controlled
    broker.seed({"single": {"partitions": 1}})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **KAFKA_PYTHON_CLIENT)
    try:
        producer.send("single", b"only", partition=0).get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    status, body = control.call("GET", "/topics/single/records?partition=1")
    assert (status, body["error"]) == (
        404, "UNKNOWN_TOPIC_OR_PARTITION: no partition single-1: the topic has 1 partition(s), "
             "numbered from 0")
    status, body = control.call("GET", "/topics/single/records?partition=0")
    assert [r["value"] for r in body["records"]] == ["only"]
    assert control.call("GET", "/topics/later/records?partition=4") == (200, {"records": []})


def test_records_as_a_read_committed_consumer_keeps_them(controlled: Controlled) -> None:
    """A confluent-kafka transactional producer commits one transaction and aborts one: the
    endpoint's default view holds both and their markers, read_committed only the committed."""
    from confluent_kafka import Producer

    broker, control = controlled
    broker.seed({"paid": {"partitions": 1}})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "control-txn"})
    producer.init_transactions(TIMEOUT_S)
    for value, commit in ((b"kept", True), (b"dropped", False)):
        producer.begin_transaction()
        producer.produce("paid", value)
        producer.flush(TIMEOUT_S)  # in the log before the abort (librdkafka's abort drops what is queued)
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)

    def view(query: str) -> list[tuple[str | None, bool]]:
        status, body = control.call("GET", f"/topics/paid/records{query}")
        assert status == 200
        return [(r["value"], r["is_control"]) for r in body["records"]]

    assert [value for value, control_record in view("") if not control_record] == ["kept", "dropped"]
    assert sum(control_record for _, control_record in view("?isolation=log")) == 2
    assert view("?isolation=read_uncommitted") == [("kept", False), ("dropped", False)]
    assert view("?isolation=read_committed") == [("kept", False)]


def test_snapshots_are_held_by_name(controlled: Controlled) -> None:
    broker, control = controlled
    broker.seed({"t": {"partitions": 1, "records": [{"value": "a"}, {"value": "b"}]}})
    assert control.call("POST", "/snapshots/base") == \
        (201, {"name": "base", "topics": ["t"], "groups": [], "records": 2})
    broker.seed({"t": {"records": [{"value": "c"}]}, "other": {}})
    assert control.call("POST", "/snapshots/base/restore")[0] == 200
    assert [r.value for r in broker.records("t")] == [b"a", b"b"] and broker.records("other") == []
    assert [s["name"] for s in control.call("GET", "/snapshots")[1]["snapshots"]] == ["base"]
    assert control.call("DELETE", "/snapshots/base")[0] == 200
    status, error = control.call("POST", "/snapshots/base/restore")
    assert status == 404 and error["error"] == "no snapshot 'base' (GET /snapshots lists them)"


def test_faults_added_from_python_are_cleared_too(controlled: Controlled) -> None:
    broker, control = controlled
    handle = broker.faults.add(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE))
    status, fault = control.call("POST", "/faults", {"api": ["FETCH", "list_offsets"], "versions": [4, 12],
                                                     "every": 3, "probability": 0.5, "seed": 7,
                                                     "action": {"type": "delay", "seconds": 0.1}})
    assert status == 201
    assert fault["rule"] == {"api": ["Fetch", "ListOffsets"], "versions": [4, 12], "seed": 7, "every": 3,
                             "probability": 0.5, "action": {"type": "delay", "seconds": 0.1}}
    status, removed = control.call("DELETE", "/faults")
    assert status == 200 and [f["id"] for f in removed["removed"]] == [fault["id"]]
    assert handle.removed and broker.faults.handles == ()


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), [
    ("POST", "/faults", b"{not json", 400, "the body is not valid JSON: Expecting property name"),
    ("POST", "/faults", b"", 400, "expected a JSON body"),
    ("POST", "/faults", b'{"action": {"type": "delay", "seconds": NaN}}', 400,
     "the body is not valid JSON: NaN is not JSON"),
    ("POST", "/faults", b'{"api": "Prodyce", "action": {"type": "stall"}}', 400,
     "api: unknown API 'Prodyce'"),
    ("POST", "/faults", b'{"action": {"type": "error", "error": "NOT_A_CODE"}}', 400,
     "action.error: unknown error code 'NOT_A_CODE'"),
    ("POST", "/faults", b'{"action": {"type": "explode"}}', 400,
     "action.type: expected one of error, delay, throttle, drop, truncate, stall, not 'explode'"),
    ("POST", "/faults", b'{"action": {"type": "stall"}, "times": 0}', 400, "times must be at least 1, not 0"),
    ("POST", "/faults", b'{"action": {"type": "stall"}, "partition": 0}', 400,
     "a partition is matched within a topic: give topic= too"),
    ("POST", "/faults", b'{"action": {"type": "stall"}, "broker": 3}', 404, "no broker index '3'"),
    ("POST", "/faults", b'{"action": {"type": "stall"}, "colour": "red"}', 400, "unknown field(s) colour"),
    ("POST", "/seed", b'{"t": {"partitions": 0}}', 400,
     "topic 't' partitions: expected an integer of at least 1"),
    ("POST", "/seed", b'["t"]', 400, "seed data must be a mapping"),
    ("GET", "/faults/99", None, 404, "no fault rule '99'"),
    ("GET", "/topics/t/records?partition=x", None, 400, "query partition: expected an integer, not 'x'"),
    ("GET", "/topics/t/records?encoding=hex", None, 400, "query encoding: expected one of utf-8, base64"),
    ("GET", "/topics/t/records?isolation=committed", None, 400,
     "query isolation must be one of 'log', 'read_uncommitted', 'read_committed', not 'committed'"),
    ("GET", "/history?since=yesterday", None, 400, "query since: expected a time in seconds"),
    ("GET", "/nowhere", None, 404, "no route GET /nowhere (see GET /openapi.json)"),
    ("PUT", "/faults", None, 405, "PUT is not allowed on /faults; use GET, POST, DELETE"),
    ("POST", "/cluster/brokers/0/stop", None, 409, "a single broker is not stopped through its own endpoint"),
])
def test_bad_requests_are_one_line_4xx_and_the_endpoint_keeps_serving(
        controlled: Controlled, method: str, path: str, body: bytes | None, status: int,
        message: str) -> None:
    _, control = controlled
    got, error = control.call(method, path, text=body)
    assert got == status and error["status"] == status
    assert error["error"].startswith(message) and "\n" not in error["error"]
    assert control.call("GET", "/health")[0] == 200


def test_history_needs_the_observer_and_says_so() -> None:
    with Broker(control="127.0.0.1:0") as broker:
        assert broker.control is not None
        status, error = ControlClient(broker.control.url).call("GET", "/history")
    assert status == 409 and "start it with Broker(history=True)" in error["error"]


def test_serve_control_starts_it_on_a_running_broker_and_it_stops_with_the_broker() -> None:
    with Broker() as broker:
        server = broker.serve_control("localhost:0")
        control = ControlClient(server.url)
        assert control.call("GET", "/health") == (200, {"status": "ok", "cluster": False, "brokers": 1,
                                                        "running": 1})
        with pytest.raises(RuntimeError, match="already serves"):
            broker.serve_control()
    with pytest.raises(ConnectionRefusedError):
        control.call("GET", "/health")


def test_a_non_loopback_control_address_is_refused_unless_allowed() -> None:
    from kafkapy.control import ControlAddressError

    with pytest.raises(ControlAddressError, match=r"'0\.0\.0\.0:0' is not a loopback address.*allow_remote"):
        Broker(control="0.0.0.0:0")
    with Broker(control="0.0.0.0:0", control_allow_remote=True) as broker:
        assert broker.control is not None and broker.control.bound is not None
        port = broker.control.bound[1]
        assert ControlClient(f"http://127.0.0.1:{port}").call("GET", "/health")[0] == 200


def test_a_yaml_seed_is_read_with_pyyaml(controlled: Controlled) -> None:
    """PyYAML is in the [test] extras, so this runs in CI."""
    broker, control = controlled
    text = b"yaml-topic:\n  partitions: 1\n  records:\n    - {key: k, value: v}\n"
    status, answer = control.call("POST", "/seed", text=text, headers={"Content-Type": "application/yaml"})
    assert (status, answer) == (200, {"seeded": ["yaml-topic"], "records": 1})
    assert [r.value for r in broker.records("yaml-topic")] == [b"v"]


def test_without_pyyaml_a_yaml_seed_is_415(controlled: Controlled, monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without PyYAML (its import blocked, as Python does for a None in sys.modules)."""
    monkeypatch.setitem(sys.modules, "yaml", None)
    _, control = controlled
    text = b"yaml-topic:\n  partitions: 1\n"
    status, answer = control.call("POST", "/seed", text=text, headers={"Content-Type": "application/yaml"})
    assert status == 415 and answer["error"].startswith("YAML seed data needs PyYAML")


@pytest.mark.parametrize(("path", "body", "message"), [
    ("/faults", {"action": {"type": "delay", "seconds": 10**400}}, "a number in the rule is too large"),
    ("/faults", {"action": {"type": "truncate", "keep": 10**400}}, "a number in the rule is too large"),
    ("/faults", {"action": {"type": "stall"}, "probability": 10**400}, "a number in the rule is too large"),
    ("/seed", {"t": {"records": [{"timestamp": 2**63}]}},
     "topic 't' record 0 timestamp: 9223372036854775808 is more than Kafka's 9223372036854775807"),
    ("/seed", {"t": {"partitions": 2**31}}, "topic 't' partitions: 2147483648 is more than Kafka's"),
    ("/seed", {"t": {"replication_factor": 2**15}}, "topic 't' replication_factor: 32768 is more"),
    ("/seed", {"t": {"records": [{"partition": 2**31}]}}, "topic 't' record 0 partition: 2147483648 is more"),
])
def test_numbers_beyond_what_kafka_carries_are_400(controlled: Controlled, path: str, body: object,
                                                   message: str) -> None:
    _, control = controlled
    status, error = control.call("POST", path, text=json.dumps(body).encode())
    assert status == 400 and error["error"].startswith(message)


@pytest.mark.parametrize(("rule", "message"), [
    ({"api": [], "action": {"type": "stall"}}, "api: an empty list matches nothing"),
    ({"versions": [5, 2], "action": {"type": "stall"}},
     "versions: expected [low, high] (inclusive, low <= high)"),
    ({"action": {"type": "delay", "seconds": -1}}, "action.seconds: expected a number of at least 0, not -1"),
    ({"action": {"type": "throttle", "milliseconds": 1.5}},
     "action.milliseconds: expected an integer, not 1.5"),
    ({"action": {"type": "drop", "when": "during"}}, "action.when: expected \"before\" or \"after\""),
    ({"action": {"type": "truncate", "keep": 1}}, "keep must be in [0, 1), not 1"),
])
def test_a_rule_that_could_not_mean_anything_is_refused(controlled: Controlled, rule: object,
                                                        message: str) -> None:
    _, control = controlled
    status, error = control.call("POST", "/faults", rule)
    assert status == 400 and error["error"].startswith(message)
