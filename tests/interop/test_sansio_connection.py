"""The sans-I/O connection objects against real peers: real clients (confluent-kafka, kafka-python)
list topics from a socketserver test server built on ServerConnection, and ClientConnection talks
to the embedded kafkapy broker over a plain socket (ApiVersions, Metadata, Produce, Fetch)."""

from __future__ import annotations

import json
import shutil
import socket
import socketserver
import subprocess
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import Request, build_record_batch, catalogue, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.connection import ClientConnection, ProtocolError, ResponseReceived, ServerConnection

TOPIC = "greetings"
# ApiVersions v3+ must name the client's software (Kafka answers INVALID_REQUEST otherwise)
SOFTWARE = {"client_software_name": "kafkapy-sansio", "client_software_version": "1.0"}
TOPIC_ID = uuid.UUID("7d1bc1e4-7a5e-4c8b-9c8d-2f7f2a0c3a11")


class _MetadataHandler(socketserver.BaseRequestHandler):
    """Answers ApiVersions and Metadata for one broker (node 0, itself) holding one topic; anything
    else, or bytes that are no request, end the connection, as a broker would."""

    server: _TestServer

    def handle(self) -> None:
        connection = ServerConnection()
        while data := self.request.recv(4096):
            try:
                requests = connection.receive_data(data)
            except ProtocolError as exc:
                self.server.errors.append(exc)
                return
            for request in requests:
                self.server.seen.append((request.api_key, request.api_version))
                body = self._answer(request)
                if body is None:
                    return
                try:
                    answer = connection.send_response(request, fit_body(
                        request.api_key, "response", request.api_version, body))
                except Exception as exc:  # the test reads it, where a handler thread's traceback is lost
                    self.server.errors.append(exc)
                    return
                self.request.sendall(answer)

    def _answer(self, request: Request) -> dict[str, Any] | None:
        if request.api_key == ApiKey.API_VERSIONS:
            ranges = {key: catalogue()[key].versions for key in (ApiKey.API_VERSIONS, ApiKey.METADATA)}
            return {"error_code": ErrorCode.NONE, "api_keys": [
                {"api_key": key, "min_version": versions.low, "max_version": versions.high}
                for key, versions in ranges.items()]}
        if request.api_key == ApiKey.METADATA:
            host, port = self.server.server_address[:2]
            wanted = request.body.topics
            names = [TOPIC] if wanted is None else [topic.name for topic in wanted]
            return {"brokers": [{"node_id": 0, "host": host, "port": port}], "cluster_id": "sansio",
                    "controller_id": 0, "topics": [self._topic(name) for name in names]}
        return None

    @staticmethod
    def _topic(name: str | None) -> Mapping[str, Any]:
        if name != TOPIC:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": []}
        return {"error_code": ErrorCode.NONE, "name": TOPIC, "topic_id": TOPIC_ID, "partitions": [
            {"error_code": ErrorCode.NONE, "partition_index": 0, "leader_id": 0, "leader_epoch": 0,
             "replica_nodes": [0], "isr_nodes": [0]}]}


class _TestServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _MetadataHandler)
        self.seen: list[tuple[int, int]] = []
        self.errors: list[Exception] = []


@pytest.fixture
def test_server() -> Iterator[_TestServer]:
    server = _TestServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _address(server: _TestServer) -> str:
    host, port = server.server_address[:2]
    return f"{host}:{port}"


def test_confluent_kafka_lists_topics_from_a_server_connection(test_server: _TestServer) -> None:
    admin = AdminClient({"bootstrap.servers": _address(test_server)})
    metadata = admin.list_topics(timeout=15)
    assert list(metadata.brokers) == [0] and metadata.cluster_id == "sansio"
    assert list(metadata.topics) == [TOPIC] and list(metadata.topics[TOPIC].partitions) == [0]
    assert metadata.topics[TOPIC].partitions[0].leader == 0
    assert test_server.seen[0][0] == ApiKey.API_VERSIONS
    # librdkafka asks Metadata at a flexible version: request header v2, response header v1
    assert any(key == ApiKey.METADATA and version >= 9 for key, version in test_server.seen)
    assert test_server.errors == []


def test_kafka_python_lists_topics_from_a_server_connection(test_server: _TestServer) -> None:
    consumer = KafkaConsumer(bootstrap_servers=_address(test_server), request_timeout_ms=10_000)
    try:
        assert consumer.topics() == {TOPIC}
        assert consumer.partitions_for_topic(TOPIC) == {0}
    finally:
        consumer.close()
    assert [key for key, _ in test_server.seen][:2] == [ApiKey.API_VERSIONS, ApiKey.METADATA]
    assert test_server.errors == []


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED (`apt-get install kcat`): kcat listing SKIPPED")
def test_kcat_lists_topics_from_a_server_connection(test_server: _TestServer) -> None:
    assert KCAT is not None
    listed = subprocess.run([KCAT, "-L", "-J", "-b", _address(test_server), "-m", "10"],
                            capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    metadata = json.loads(listed.stdout)
    assert [topic["topic"] for topic in metadata["topics"]] == [TOPIC]
    assert [broker["id"] for broker in metadata["brokers"]] == [0]
    assert test_server.errors == []


def _round_trip(sock: socket.socket, connection: ClientConnection, *sent: bytes) -> list[ResponseReceived]:
    """Write requests, then read (7 bytes at a time, so every frame arrives in pieces) until every
    request sent is answered."""
    sock.sendall(b"".join(sent))
    events: list[ResponseReceived] = []
    while connection.in_flight:
        data = sock.recv(7)
        events += connection.receive_data(data)
        if not data:
            break
    return events


def test_a_client_connection_talks_to_the_embedded_broker() -> None:
    with Broker({"advertise.private.api.keys": "false"}) as broker, \
            socket.create_connection(tuple(broker.bootstrap_servers.rsplit(":", 1)), timeout=10) as sock:
        connection = ClientConnection("sansio-test")
        # pipelined: the broker answers in order, and each answer is decoded at its own version
        wanted = {"topics": [{"name": "sansio"}], "allow_auto_topic_creation": True}  # creates it
        # ApiVersions' response header is v0 always, Metadata v12's v1 (flexible), v1's v0
        versions, metadata, old_metadata = _round_trip(
            sock, connection, connection.send_request(ApiKey.API_VERSIONS, 3, SOFTWARE),
            connection.send_request(ApiKey.METADATA, 12, wanted),
            connection.send_request(ApiKey.METADATA, 1, {"topics": [{"name": "sansio"}]}))
        assert versions.request.api_key == ApiKey.API_VERSIONS and versions.response.body.error_code == 0
        advertised = {entry.api_key: entry.max_version for entry in versions.response.body.api_keys}
        assert advertised[ApiKey.PRODUCE] >= 9 and advertised[ApiKey.FETCH] >= 12
        assert (metadata.request.api_key, metadata.request.correlation_id) == (ApiKey.METADATA, 1)
        port = int(broker.bootstrap_servers.rsplit(":")[1])
        assert [listener.port for listener in metadata.response.body.brokers] == [port]
        assert [topic.name for topic in metadata.response.body.topics] == ["sansio"]
        assert old_metadata.request == (ApiKey.METADATA, 1, 2)
        assert [topic.name for topic in old_metadata.response.body.topics] == ["sansio"]

        batch = build_record_batch([(b"k1", b"hello"), (b"k2", b"sans-io")])
        [produced] = _round_trip(sock, connection, connection.send_request(ApiKey.PRODUCE, 9, {
            "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": "sansio", "partition_data": [{"index": 0, "records": batch}]}]}))
        [partition] = produced.response.body.responses[0].partition_responses
        assert (partition.error_code, partition.base_offset) == (ErrorCode.NONE, 0)

        [fetched] = _round_trip(sock, connection, connection.send_request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": "sansio", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}))
        assert fetched.request.api_key == ApiKey.FETCH and fetched.response.body.error_code == 0
        [fetched_partition] = fetched.response.body.responses[0].partitions
        assert fetched_partition.high_watermark == 2
        records = fetched_partition.records  # lazy until read
        assert [(r.offset, r.key, r.value) for r in records.records()] == [(0, b"k1", b"hello"),
                                                                              (1, b"k2", b"sans-io")]
        assert connection.in_flight == () and connection.buffered_bytes == 0
