"""``kafkapy serve --control`` as a real process, driven over HTTP as a Java or Go test would drive
it: seed, then consume with confluent-kafka; a fault added as JSON reaches kafka-python; a broker
of the cluster taken down and up; reset. A non-loopback address is one error line and exit 2."""

from __future__ import annotations

import base64
import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from quick_clients import KAFKA_PYTHON_CLIENT, RDKAFKA_CLIENT, RDKAFKA_CONSUMER, warm_transaction_coordinator
from serve_in_process import serve_in_process

from kafkapy.testing import wait_until

from .conftest import ControlClient

TIMEOUT_S = 30
CONTROL = re.compile(r"control endpoint on (http://\S+)")
SERVING = re.compile(r"serving \d+ broker\(s\), bootstrap servers (\S+)")


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kafkapy.cli", "serve", *args], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)


@contextlib.contextmanager
def serving(*args: str, control: str = "127.0.0.1:0") -> Iterator[tuple[ControlClient, str, list[str]]]:
    """``kafkapy serve --control CONTROL ARGS`` until SIGTERM: its endpoint, bootstrap servers
    and the log lines up to "serving"."""
    proc = serve("--control", control, "--override", "listeners=PLAINTEXT://127.0.0.1:0", *args)
    assert proc.stderr is not None
    try:
        lines: list[str] = []
        url = bootstrap = None
        deadline = time.monotonic() + TIMEOUT_S
        while bootstrap is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if found := CONTROL.search(line):
                url = found.group(1)
            if found := SERVING.search(line):
                bootstrap = found.group(1)
        assert url is not None and bootstrap is not None, "".join(lines)
        yield ControlClient(url), bootstrap, lines
    finally:
        proc.send_signal(signal.SIGTERM)
        with proc.stderr:  # closed even when the broker did not exit cleanly
            assert proc.wait(timeout=TIMEOUT_S) == 0
            rest = proc.stderr.read()
    assert "Traceback" not in rest


@pytest.fixture
def served() -> Iterator[tuple[ControlClient, str]]:
    """Two brokers and their control endpoint, ports chosen by the system; stopped with SIGTERM.
    Groups form at once (Kafka's own config/server.properties sets the delay to 0 too): the 3 s
    default would be most of the test's time, and the delay is not what it is about."""
    with serving("--brokers", "2", "--override", "group.initial.rebalance.delay.ms=0") as (control, bootstrap,
                                                                                         _):
        yield control, bootstrap


def consume(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"control-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **RDKAFKA_CONSUMER})
    seen: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append((message.key(), message.value()))
    finally:
        consumer.close()
    return sorted(seen, key=repr)


def test_serve_control_drives_a_two_broker_cluster(served: tuple[ControlClient, str]) -> None:
    from kafka import KafkaProducer
    from kafka.errors import PolicyViolationError

    control, bootstrap = served
    assert control.call("GET", "/health") == (200, {"status": "ok", "cluster": True, "brokers": 2,
                                                    "running": 2})
    status, _ = control.call("POST", "/seed", {"orders": {"partitions": 2, "records": [
        {"key": "a", "value": "one", "partition": 0}, {"key": "b", "value": "two", "partition": 1}]}})
    assert status == 200
    assert consume(bootstrap, "orders", 2) == [(b"a", b"one"), (b"b", b"two")]

    rule = {"api": "Produce", "topic": "orders", "times": 1,
            "action": {"type": "error", "error": "POLICY_VIOLATION"}}
    status, fault = control.call("POST", "/faults", rule)
    assert status == 201 and fault["brokers"] == [0, 1]  # every running broker: either may lead
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, request_timeout_ms=TIMEOUT_S * 1000,
                             **KAFKA_PYTHON_CLIENT)
    try:
        with pytest.raises(PolicyViolationError):
            producer.send("orders", b"refused", partition=0).get(TIMEOUT_S)
        producer.send("orders", b"three", partition=0).get(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    assert control.call("GET", f"/faults/{fault['id']}")[1]["fired"] == 1
    status, history = control.call("GET", "/history")  # serve --control keeps a request history
    assert "POLICY_VIOLATION" in [entry["error"] for entry in history["history"] if entry["api"] == "Produce"]
    status, records = control.call("GET", "/topics/orders/records?partition=0")
    assert [r["value"] for r in records["records"]] == ["one", "three"]

    status, cluster = control.call("POST", "/cluster/brokers/1/stop")
    assert status == 200 and [b["running"] for b in cluster["brokers"]] == [True, False]
    assert len(cluster["bootstrap_servers"].split(",")) == 1
    status, cluster = control.call("POST", "/cluster/brokers/1/start")
    assert status == 200 and [b["running"] for b in cluster["brokers"]] == [True, True]

    assert control.call("POST", "/reset") == (200, {"reset": True})
    assert control.call("GET", "/topics/orders/records") == (200, {"records": []})


BAD_CONTROL = [
    (["--control", "0.0.0.0:0"], "control address '0.0.0.0:0' is not a loopback address"),
    (["--control", "127.0.0.1"], "control address '127.0.0.1' is not HOST:PORT"),
    (["--control", "127.0.0.1:http"], "the port 'http' is not a number"),
    (["--control-allow-remote"], "--control-allow-remote needs --control HOST:PORT"),
    (["--virtual-clock"], "--virtual-clock needs --control HOST:PORT"),
]


def one_error_line_before_anything_listens(code: int, err: str, message: str) -> None:
    assert code == 2
    assert message in err and "Traceback" not in err and "listening on" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_bad_control_address_is_one_error_line_from_the_real_process() -> None:
    args, message = BAD_CONTROL[0]
    proc = serve(*args, "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    _, err = proc.communicate(timeout=60)
    one_error_line_before_anything_listens(proc.returncode, err, message)


@pytest.mark.parametrize(("args", "message"), BAD_CONTROL)
def test_a_bad_control_address_is_one_error_line_before_anything_listens(args: list[str],
                                                                         message: str) -> None:
    """In this process (the real process's output is proven above, for the first of these)."""
    code, err = serve_in_process(*args, "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    one_error_line_before_anything_listens(code, err, message)


def test_serve_virtual_clock_aborts_an_abandoned_transaction_when_advanced_over_http() -> None:
    """What a Java test would do: a transaction left open, the clock moved past
    transaction.timeout.ms over HTTP, the coordinator's abort marker in the log. One broker, its
    endpoint on a loopback address given by name (one process for both, as each costs half a
    second to start)."""
    from confluent_kafka import Producer

    with serving("--virtual-clock", control="localhost:0") as (control, bootstrap, lines):
        assert control.call("GET", "/cluster")[1]["cluster"] is False
        assert any("on a virtual clock" in line for line in lines)
        assert control.call("GET", "/clock")[1]["virtual"] is True
        assert control.call("POST", "/seed", {"orders": {"partitions": 1}})[0] == 200
        warm_transaction_coordinator(bootstrap)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "abandoned",
                             **RDKAFKA_CLIENT})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce("orders", b"never committed")
        assert producer.flush(TIMEOUT_S) == 0
        assert control.call("POST", "/clock/advance", {"seconds": 30})[1]["time"] == 30
        assert markers(control) == []  # transaction.timeout.ms (librdkafka's 60 s) not yet passed
        status, clock = control.call("POST", "/clock/advance", {"seconds": 40})  # + the 10 s check
        assert status == 200 and clock["time"] == 70
        wait_until(lambda: markers(control), what="the abort marker")
        status, transaction = control.call("GET", "/transactions/abandoned")
        assert status == 200 and transaction["state"] == "CompleteAbort"
        assert [r["value"] for r in records(control) if not r["is_control"]] == ["never committed"]


def records(control: ControlClient) -> list[dict[str, Any]]:
    status, found = control.call("GET", "/topics/orders/records?encoding=base64")
    assert status == 200
    return [{**r, "value": None if r["value"] is None or r["is_control"] else
             base64.b64decode(r["value"]).decode()} for r in found["records"]]


def markers(control: ControlClient) -> list[dict[str, Any]]:
    return [r for r in records(control) if r["is_control"]]
