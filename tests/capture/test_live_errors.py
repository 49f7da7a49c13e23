"""The rows' ``errors`` against tshark's ``kafka.error`` on a live capture with failures in it.

The embedded broker answers, on loopback while dumpcap records: a Produce to a partition the
topic does not have (beside one it has), a Fetch at an offset past the log's end, a ListOffsets
of a missing partition, a JoinGroup without a member id (MEMBER_ID_REQUIRED) and an OffsetCommit
for a member the group does not know. Every request is at a version tshark 4.0 dissects (no
flexible header, which it misreads), so tshark's error codes are the oracle: for each response,
the non-zero ``kafka.error`` values, in order, are the rows' ``errors`` codes. The requests are
written with kafkapy's codec on a plain socket: no client sends these on purpose (a producer
refuses a partition its metadata lacks), and what is tested is the decoder, against tshark.

Skipped, saying why, without dumpcap/tshark or capture permission.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_capture import TSHARK, capturing
from raw_frames import exchange

from kafkapy.capture.rows import decode_capture
from kafkapy.cli import main as cli_main
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import build_record_batch, decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.error_sites import body_errors

TOPIC = "orders"


def _records() -> Any:
    return build_record_batch([{"key": b"k", "value": b"v"}])


# Before the capture, each repeated until it succeeds: the topic made (a Produce creates it, as
# auto-creation does, answering UNKNOWN_TOPIC_OR_PARTITION until it is there) and the group's
# coordinator loaded (NOT_COORDINATOR until then).
SETUP: list[tuple[int, int, dict[str, Any]]] = [
    (ApiKey.PRODUCE, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": _records()}]}]}),
    (ApiKey.FIND_COORDINATOR, 2, {"key": "analysts", "key_type": 0}),
]

# (api key, version, body): each answered with a non-zero code somewhere
REQUESTS: list[tuple[int, int, dict[str, Any]]] = [
    (ApiKey.PRODUCE, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": _records()},
                                           {"index": 7, "records": _records()}]}]}),
    (ApiKey.FETCH, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                         "fetch_offset": 1_000_000, "log_start_offset": -1,
                                         "partition_max_bytes": 1 << 20}]}],
                        "forgotten_topics_data": [], "rack_id": ""}),
    (ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                       for p in (0, 9)]}]}),
    (ApiKey.JOIN_GROUP, 5, {"group_id": "analysts", "session_timeout_ms": 10000,
                            "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                            "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": b""}]}),
    (ApiKey.OFFSET_COMMIT, 7, {"group_id": "analysts", "generation_id_or_member_epoch": 3,
                               "member_id": "nobody", "group_instance_id": None, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]}),
]  # fmt: skip


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, list[Any]]]:
    path = tmp_path_factory.mktemp("errors") / "errors.pcapng"
    answers: list[Any] = []
    with Broker() as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            for key, version, body in SETUP:
                for attempt in range(100):
                    frame = encode_request(key, version, attempt, "setup", body)
                    answer = decode_response(exchange(sock, frame), key, version)
                    if not body_errors(answer.body):
                        break
                    time.sleep(0.1)
                else:
                    pytest.fail(f"{ApiKey(key).name} kept failing: {body_errors(answer.body)}")
        with capturing(path, int(port)), socket.create_connection((host, int(port)), timeout=10) as sock:
            for correlation_id, (key, version, body) in enumerate(REQUESTS, 1):
                frame = encode_request(key, version, correlation_id, "analyst", body)
                answers.append(decode_response(exchange(sock, frame), key, version))
    yield path, int(port), answers


def _tshark_errors(path: Path, port: int) -> dict[int, list[int]]:
    """correlation id -> the non-zero ``kafka.error`` codes of its response, as tshark reads them."""
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", f"kafka && tcp.srcport=={port}",
         "-T", "fields", "-E", "separator=|", "-e", "kafka.correlation_id", "-e", "kafka.error"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    found: dict[int, list[int]] = {}
    for line in out.stdout.splitlines():
        correlation_id, codes = line.split("|")
        found[int(correlation_id)] = [int(c) for c in codes.split(",") if c and int(c) != 0]
    return found


def test_errors_are_tsharks_error_codes(capture: tuple[Path, int, list[Any]]) -> None:
    path, port, answers = capture
    rows = {row["correlation_id"]: row for row in decode_capture(path, kafka_ports=[port])}
    expected = _tshark_errors(path, port)
    assert sorted(expected) == list(range(1, len(REQUESTS) + 1))  # tshark dissected every response
    assert all(expected.values())  # and each failed somewhere
    for correlation_id, codes in expected.items():
        errors = rows[correlation_id]["errors"]
        assert [e["code"] for e in errors] == codes, correlation_id
        assert all(e["name"] == ErrorCode(e["code"]).name for e in errors)
    produce = rows[1]["errors"]
    assert produce == [{"topic": TOPIC, "partition": 7, "code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "name": "UNKNOWN_TOPIC_OR_PARTITION"}]
    assert rows[1]["error_code"] is None  # Produce has no top-level code: only errors shows it
    assert rows[2]["errors"] == [{"topic": TOPIC, "partition": 0, "code": ErrorCode.OFFSET_OUT_OF_RANGE,
                                  "name": "OFFSET_OUT_OF_RANGE"}]
    assert rows[3]["errors"] == [{"topic": TOPIC, "partition": 9,
                                  "code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  "name": "UNKNOWN_TOPIC_OR_PARTITION"}]
    member = answers[3].body["member_id"]  # the id the broker gave, to join again with
    assert rows[4]["errors"] == [{"member": member, "code": ErrorCode.MEMBER_ID_REQUIRED,
                                  "name": "MEMBER_ID_REQUIRED"}]
    assert rows[5]["errors"][0]["topic"] == TOPIC and rows[5]["errors"][0]["partition"] == 0


def test_decode_filters_keep_the_failed_exchanges(capture: tuple[Path, int, list[Any]],
                                                  tmp_path: Path) -> None:
    path, port, _ = capture
    ports = ["--kafka-port", str(port)]
    out = tmp_path / "rows.jsonl"
    assert cli_main(["decode", str(path), *ports, "--errors-only", "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["correlation_id"] for r in rows] == list(range(1, len(REQUESTS) + 1))
    assert cli_main(["decode", str(path), *ports, "--errors-only", "--api", "produce,Fetch",
                     "-o", str(out)]) == 0
    assert [json.loads(line)["api_name"] for line in out.read_text().splitlines()] == ["Produce", "Fetch"]
    assert cli_main(["decode", str(path), *ports, "--topic", TOPIC, "--client-id", "analyst",
                     "-o", str(out)]) == 0
    names = [json.loads(line)["api_name"] for line in out.read_text().splitlines()]
    assert names == ["Produce", "Fetch", "ListOffsets", "OffsetCommit"]
