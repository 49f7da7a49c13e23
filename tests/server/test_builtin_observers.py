"""The built-in observers against a served broker: AuditObserver's counts, CaptureObserver's pcaps."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkapy import Broker
from kafkapy.capture.pairing import read_exchanges
from kafkapy.observers import AuditObserver, AuditRow, CaptureObserver
from kafkapy.observers.capture import CAPTURE_PATH_ENV
from kafkapy.protocol import decode_request, encode_request, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import ConfigError
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.observers import ObserverChain

AUDIT = "kafkapy.observers.AuditObserver"
CAPTURE = "kafkapy.observers.CaptureObserver"
TSHARK = shutil.which("tshark")

API_VERSIONS, METADATA, DESCRIBE_CLUSTER, PRODUCE, FETCH = 18, 3, 60, 0, 1

# (api key, version, client id, body): requests every served API routes; client ids differ on purpose.
KNOWN_REQUESTS: list[tuple[int, int, str | None, dict[str, Any]]] = [
    (API_VERSIONS, 3, "audit-a", {"client_software_name": "kafkapy-test", "client_software_version": "1"}),
    (API_VERSIONS, 0, "audit-b", {}),
    (METADATA, 9, "audit-a", {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False}),
    (DESCRIBE_CLUSTER, 0, "audit-a", {"include_cluster_authorized_operations": False}),
    (API_VERSIONS, 3, None, {"client_software_name": "kafkapy-test", "client_software_version": "1"}),
]


class RawClient:
    """Requests on one socket, pipelined: every frame is sent before any response is read."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)

    def exchange(self, frames: list[bytes]) -> list[bytes]:
        self.sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in frames))
        return [self._read_frame() for _ in frames]

    def _read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def _requests(first_correlation_id: int = 1) -> list[bytes]:
    return [encode_request(key, version, first_correlation_id + i, client_id, body)
            for i, (key, version, client_id, body) in enumerate(KNOWN_REQUESTS)]


def _audit(broker: Broker) -> AuditObserver:
    assert broker.runtime is not None
    found = [o for o in broker.runtime.observers.observers if isinstance(o, AuditObserver)]
    assert len(found) == 1
    return found[0]


def _rows(observer: AuditObserver) -> dict[tuple[str | None, int], AuditRow]:
    rows = observer.snapshot()
    assert all(r.principal == "User:ANONYMOUS" for r in rows)
    return {(r.client_id, r.api_key): r for r in rows}


# --- AuditObserver -----------------------------------------------------------------------------


def test_audit_counts_requests_and_bytes_per_client_id_and_api() -> None:
    frames = _requests()
    with Broker({"observer.class.names": AUDIT}) as broker:
        client = RawClient(broker.bootstrap_servers)
        try:
            responses = client.exchange(frames)
            responses += client.exchange(frames[:1])  # a second ApiVersions v3 from audit-a
        finally:
            client.close()
        observer = _audit(broker)
        assert observer in AuditObserver.instances()
        rows = _rows(observer)
    sent = [*frames, frames[0]]
    want: dict[tuple[str | None, int], list[int]] = {}
    for frame, response, (key, _, client_id, _) in zip(sent, responses, [*KNOWN_REQUESTS, KNOWN_REQUESTS[0]]):
        counts = want.setdefault((client_id, key), [0, 0, 0, 0])
        counts[0] += 1
        counts[1] += len(frame)
        counts[2] += 1
        counts[3] += len(response)
    got = {k: [r.requests, r.request_bytes, r.responses, r.response_bytes] for k, r in rows.items()}
    assert got == want
    assert rows[("audit-a", API_VERSIONS)].requests == 2
    assert rows[("audit-a", METADATA)].api_name == "Metadata"


def test_audit_counts_requests_the_broker_does_not_route() -> None:
    # DescribeQuorum: a key no default module serves (KRaft's; kafkapy is ZooKeeper-mode)
    unknown = encode_request(ApiKey.DESCRIBE_QUORUM, 0, 41, "audit-u", {"topics": []})
    unsupported = struct.pack(">hhih", API_VERSIONS, 99, 42, -1)  # ApiVersions v99: the v0 fallback answers
    with Broker({"observer.class.names": AUDIT}) as broker:
        client = RawClient(broker.bootstrap_servers)
        try:
            responses = client.exchange([unknown, unsupported])
        finally:
            client.close()
        rows = _rows(_audit(broker))
    # No frame reaches observers for these, so the client id is unknown and request bytes are 0.
    anonymous = "User:ANONYMOUS"
    assert rows[(None, ApiKey.DESCRIBE_QUORUM)] == AuditRow(
        anonymous, None, ApiKey.DESCRIBE_QUORUM, "DescribeQuorum", 1, 0, 1, len(responses[0]))
    assert len(responses[0]) == 4
    assert rows[(None, API_VERSIONS)] == AuditRow(anonymous, None, API_VERSIONS, "ApiVersions", 1, 0, 1,
                                                  len(responses[1]))


def test_audit_with_kafka_python_admin_client() -> None:
    with Broker({"observer.class.names": AUDIT}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="audit-admin",
                                 request_timeout_ms=10_000)
        try:
            cluster = admin.describe_cluster()
        finally:
            admin.close()
        rows = [r for r in _audit(broker).snapshot() if r.client_id == "audit-admin"]
    assert cluster["cluster_id"]
    assert rows, "kafka-python's requests were not attributed to its client id"
    assert API_VERSIONS in {r.api_key for r in rows}
    for row in rows:
        assert row.requests == row.responses > 0
        assert row.request_bytes > 0 and row.response_bytes > 0


def test_audit_attributes_produce_and_fetch_record_bytes_per_topic() -> None:
    # The broker serves neither API yet, so the observer is fed in the dispatcher's call order.
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(10):
        builder.append(i, timestamp=1_767_225_600_000 + i, key=None, value=b"v" * 100, headers=[])
    batch = bytes(builder.build())
    topic_id = uuid.UUID(int=7)
    conn = ConnectionInfo("test-1", "PLAINTEXT", "PLAINTEXT", ("127.0.0.1", 50000), ("127.0.0.1", 9092))
    observer = AuditObserver()
    chain = ObserverChain([observer])

    produce = encode_request(PRODUCE, 9, 5, "producer-1", {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "orders", "partition_data": [{"index": 0, "records": batch},
                                              {"index": 1, "records": batch}]},
        {"name": "audit", "partition_data": [{"index": 0, "records": None}]}]})
    produce_response = {"responses": [], "throttle_time_ms": 0}
    chain.record_frame(conn, True, produce)
    chain.record_request(decode_request(produce).body, conn, PRODUCE, 9, 5)
    chain.record_response(produce_response, conn, 9, 5)
    chain.record_frame(conn, False, encode_response(PRODUCE, 9, 5, produce_response))

    fetch = encode_request(FETCH, 13, 6, "consumer-1", {"topics": [], "forgotten_topics_data": []})
    fetch_response = {"error_code": 0, "session_id": 0, "responses": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "records": batch}]}]}
    fetch_frame = encode_response(FETCH, 13, 6, fetch_response)
    chain.record_frame(conn, True, fetch)
    chain.record_request(decode_request(fetch).body, conn, FETCH, 13, 6)
    chain.record_response(fetch_response, conn, 13, 6)
    chain.record_frame(conn, False, fetch_frame)

    topics = {(r.client_id, r.topic): (r.produced_bytes, r.fetched_bytes) for r in observer.topic_snapshot()}
    assert topics == {("producer-1", "orders"): (2 * len(batch), 0), ("producer-1", "audit"): (0, 0),
                      ("consumer-1", str(topic_id)): (0, len(batch))}
    rows = _rows(observer)
    assert rows[("consumer-1", FETCH)].response_bytes == len(fetch_frame)
    assert rows[("producer-1", PRODUCE)].request_bytes == len(produce)


# --- CaptureObserver ---------------------------------------------------------------------------


@pytest.fixture
def capture_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(CAPTURE_PATH_ENV, raising=False)  # the config key must be what is used
    return tmp_path / "broker.pcap"


def _served_capture(path: Path) -> tuple[list[bytes], list[bytes], int, list[tuple[str, int]]]:
    frames = _requests(100)
    admin_frames = _requests(200)
    with Broker({"observer.class.names": f"{AUDIT},{CAPTURE}", "capture.path": str(path)}) as broker:
        port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        first, second = RawClient(broker.bootstrap_servers), RawClient(broker.bootstrap_servers)
        try:
            responses = first.exchange(frames) + second.exchange(admin_frames)
            addresses = [first.sock.getsockname()[:2], second.sock.getsockname()[:2]]
        finally:
            first.close()
            second.close()
    return frames + admin_frames, responses, port, addresses


def test_capture_decodes_into_the_same_exchanges(capture_path: Path) -> None:
    sent, received, port, addresses = _served_capture(capture_path)
    exchanges = list(read_exchanges(capture_path, kafka_ports=[port]))
    assert [x.status for x in exchanges] == ["ok"] * len(sent)
    got = [(x.api_key, x.api_version, x.correlation_id, x.header.client_id if x.header else "?")
           for x in exchanges]
    want = [(key, version, corr, client_id) for corr, (key, version, client_id, _) in
            [*((100 + i, r) for i, r in enumerate(KNOWN_REQUESTS)),
             *((200 + i, r) for i, r in enumerate(KNOWN_REQUESTS))]]
    assert got == want
    assert [x.request_frame.body for x in exchanges if x.request_frame] == sent
    assert [x.response_frame.body for x in exchanges if x.response_frame] == received
    clients = sorted({(x.conn.client.ip, x.conn.client.port) for x in exchanges})
    assert clients == sorted((str(ip), p) for ip, p in addresses)
    assert {x.conn.server.port for x in exchanges} == {port}


def test_capture_reads_in_tshark(capture_path: Path) -> None:
    if TSHARK is None:
        pytest.skip("TSHARK NOT INSTALLED: the Wireshark cross-check of CaptureObserver's pcap is SKIPPED "
                    "(DEBIAN_FRONTEND=noninteractive apt-get install -y tshark)")
    sent, _, port, _ = _served_capture(capture_path)
    result = subprocess.run([TSHARK, "-r", str(capture_path), "-d", f"tcp.port=={port},kafka", "-T", "fields",
                             "-e", "kafka.request_frame", "-e", "kafka.api_key", "-e", "kafka.correlation_id",
                             "-e", "_ws.expert.message"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    problems = [line for line in result.stderr.splitlines() if line.strip() and "Running as user" not in line]
    assert problems == []
    requests, responses = [], []
    for line in result.stdout.splitlines():
        request_frame, api_key, correlation_id, expert = (line.split("\t") + [""] * 4)[:4]
        assert "malformed" not in expert.lower(), line
        if api_key:
            (responses if request_frame else requests).append((int(api_key), int(correlation_id)))
    want = [struct.unpack_from(">hxxi", f) for f in sent]
    assert requests == want
    assert responses == want  # tshark paired each response with its request (kafka.request_frame)


def test_capture_needs_a_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_PATH_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"capture\.path is not set"):
        Broker({"observer.class.names": CAPTURE}).__enter__()


def test_capture_path_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE_PATH_ENV, str(tmp_path / "env.pcap"))
    with Broker({"observer.class.names": CAPTURE}) as broker:
        client = RawClient(broker.bootstrap_servers)
        try:
            client.exchange(_requests()[:1])
        finally:
            client.close()
    assert [x.status for x in read_exchanges(tmp_path / "env.pcap",
                                             kafka_ports=[int(broker.bootstrap_servers.rsplit(":", 1)[1])])
            ] == ["ok"]


def test_capture_refuses_a_file_another_broker_writes(tmp_path: Path) -> None:
    same = {"observer.class.names": CAPTURE, "capture.path": str(tmp_path / "same.pcap")}
    with Broker(same):
        with pytest.raises(ConfigError, match="already written by another broker"):
            Broker(same).__enter__()
    each = {"observer.class.names": CAPTURE, "capture.path": str(tmp_path / "broker-{instance}.pcap")}
    with Broker(each) as one, Broker(each) as two:
        paths = [o.path for b in (one, two) for o in b.runtime.observers.observers  # type: ignore[union-attr]
                 if isinstance(o, CaptureObserver)]
    assert len(set(paths)) == 2 and all(p is not None and p.exists() for p in paths)


@pytest.mark.parametrize(("api_key", "version", "client_id"), [
    (7, 0, None), (7, 1, "shutdown"), (7, 3, "flexible"), (18, 3, None), (18, 3, "ünïcode"), (3, 12, ""),
])
def test_audit_reads_the_client_id_as_the_codec_does(api_key: int, version: int,
                                                     client_id: str | None) -> None:
    from kafkapy.observers.audit import _client_id
    from kafkapy.protocol import decode_request_header

    frame = encode_request(api_key, version, 77, client_id, {})
    header = decode_request_header(frame)
    assert _client_id(frame) == (api_key, 77, header.client_id)
    assert _client_id(frame[:9]) is None or header.header_version == 0
