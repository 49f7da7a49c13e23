"""The consumer protocol's bytes in a live kafka-python consumer's JoinGroup and SyncGroup, against
tshark and against what the consumer itself says.

A kafka-python consumer joins a group on the embedded broker while dumpcap records (JoinGroup v7,
SyncGroup v5: flexible versions, which tshark 4.0 dissects). tshark shows the subscriptions and
assignments only as bytes (``kafka.protocol_metadata``, ``kafka.member_metadata``,
``kafka.member_assignment``); the rows must hold the very same bytes, in the same order, and
beside them their decoding: the topic the consumer subscribed to and the partitions it was
assigned, as the consumer reports them.

Skipped, saying why, without dumpcap/tshark or capture permission.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_capture import TSHARK, capturing

from kafkapy.capture.rows import decode_capture
from kafkapy.embedded import Broker

TOPIC = "orders"
GROUP = "analysts"


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    from kafka import KafkaConsumer, KafkaProducer

    path = tmp_path_factory.mktemp("groups") / "groups.pcapng"
    with Broker() as broker:
        bootstrap = broker.bootstrap_servers
        port = int(bootstrap.rsplit(":", 1)[1])
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send(TOPIC, b"v").get(timeout=10)
        producer.close()
        with capturing(path, port):
            consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                                     client_id="kp-consumer", auto_offset_reset="earliest",
                                     consumer_timeout_ms=3000)
            values = [m.value for m in consumer]
            seen = {"values": values, "assignment": sorted((tp.topic, tp.partition)
                                                           for tp in consumer.assignment())}
            consumer.close()
    yield path, port, seen


def _tshark_bytes(path: Path, port: int) -> list[tuple[int, bool, list[str]]]:
    """(correlation id, from the client, the consumer-protocol bytes in hex) per JoinGroup and
    SyncGroup PDU, as tshark reads them."""
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", " || ".join(
            f"kafka.{side}_key == {key}" for side in ("request", "response") for key in (11, 14)),
         "-T", "fields", "-E", "separator=|", "-e", "kafka.correlation_id", "-e", "tcp.dstport",
         "-e", "kafka.protocol_metadata", "-e", "kafka.member_metadata", "-e", "kafka.member_assignment"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    found = []
    for line in out.stdout.splitlines():
        correlation_id, dst, *fields = line.split("|")
        found.append((int(correlation_id), int(dst) == port,
                      [h for field in fields for h in field.split(",") if field]))
    return found


def _row_bytes(body: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """(hex of the raw bytes, their decoding) of each consumer-protocol field of a body, in order."""
    found: list[tuple[str, Any]] = []
    if body is None:
        return found
    for item in [*(body.get("protocols") or ()), *(body.get("members") or ()),
                 *(body.get("assignments") or ()), body]:
        for key in ("metadata", "assignment"):
            if isinstance(item.get(key), str):
                found.append((base64.b64decode(item[key]).hex(), item.get(key + "_decoded")))
    return found


def test_the_rows_hold_tsharks_bytes_and_decode_them_as_the_consumer_sees_them(
        capture: tuple[Path, int, dict[str, Any]]) -> None:
    path, port, seen = capture
    assert seen["values"] == [b"v"] and seen["assignment"] == [(TOPIC, 0)]
    rows = {row["correlation_id"]: row for row in decode_capture(path, kafka_ports=[port])
            if row["api_name"] in ("JoinGroup", "SyncGroup")}
    expected = _tshark_bytes(path, port)
    assert {c for c, _, _ in expected} == set(rows)  # tshark dissected every exchange
    decoded: list[Any] = []
    for correlation_id, from_client, hexes in expected:
        row = rows[correlation_id]
        fields = _row_bytes(json.loads(row["request" if from_client else "response"]))
        assert [h for h, _ in fields] == hexes, (correlation_id, from_client)
        decoded += [d for _, d in fields]
    subscriptions = [d for d in decoded if d is not None and "topics" in d]
    assignments = [d for d in decoded if d is not None and "assigned_partitions" in d]
    assert subscriptions and all(d["topics"] == [TOPIC] for d in subscriptions)
    final = assignments[-1]["assigned_partitions"]
    assert [(a["topic"], p) for a in final for p in a["partitions"]] == seen["assignment"]
    assert all(row["topics"] == [TOPIC] for row in rows.values() if row["api_name"] == "JoinGroup")
