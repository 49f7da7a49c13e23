"""The broker's wire rules, checked byte by byte over plain sockets."""

from __future__ import annotations

import base64
import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from held_request import HeldDescribeCluster, HeldMetadata, held, nothing_to_read
from server_wire import Closed, KafkaSocket, frame, raw_header, request_frame, split_address

from kafkapy import Broker
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.core import PROTOCOL_HISTORY, PROTOCOL_VERSION
from kafkapy.store import MemoryStore
from kafkapy.testing import wait_until

API_VERSIONS, METADATA, DESCRIBE_CLUSTER, BROKER_METADATA = 18, 3, 60, 1010
# What a default broker serves: the set the current KIP-35 ProtocolVersion stands for.
SERVED = {key: (low, high) for key, low, high in PROTOCOL_HISTORY[PROTOCOL_VERSION]}
SOFTWARE = {"client_software_name": "kafkapy-tests", "client_software_version": "1.0"}


def software(version: int) -> dict[str, str]:
    """An ApiVersions request body: v3+ name the client software."""
    return SOFTWARE if version >= 3 else {}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"tag.rack": "r8a9", "tag.team": "streams", "tag.aws.zone": "eu-central-1"}) as b:
        yield b


@pytest.fixture
def conn(broker: Broker) -> Iterator[KafkaSocket]:
    with KafkaSocket(broker.bootstrap_servers) as s:
        yield s


def empty_response(correlation_id: int) -> bytes:
    return struct.pack(">ii", 4, correlation_id)


def read_raw_frame(conn: KafkaSocket) -> bytes:
    """One response frame with its size field, as sent."""
    body = conn.read_frame()
    return struct.pack(">i", len(body)) + body


def assert_serves(conn: KafkaSocket) -> None:
    response = conn.call(API_VERSIONS, 3, SOFTWARE)
    assert response.body["error_code"] == 0


# --- ApiVersions ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_advertises_exactly_what_is_served(broker: Broker, conn: KafkaSocket,
                                                         version: int) -> None:
    response = conn.call(API_VERSIONS, version, software(version))
    assert response.body["error_code"] == 0
    advertised = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response.body["api_keys"]}
    assert broker.runtime is not None
    assert advertised == broker.runtime.dispatcher.served_versions() == SERVED
    # ... and every advertised version really is served (no empty response).
    for key, (low, high) in advertised.items():
        for v in {low, high}:
            # Produce's default acks (0) takes no answer; acks 1 does
            body = software(v) if key == API_VERSIONS else {"acks": 1} if key == ApiKey.PRODUCE else {}
            correlation_id = conn.send(key, v, body)
            raw = conn.read_frame()
            assert len(raw) > 4, (key, v)
            assert decode_response(raw, key, v).correlation_id == correlation_id


def test_private_keys_can_be_left_out_but_are_still_served() -> None:
    with Broker({"advertise.private.api.keys": "false"}) as b, KafkaSocket(b.bootstrap_servers) as s:
        keys = {k["api_key"] for k in s.call(API_VERSIONS, 4, SOFTWARE).body["api_keys"]}
        assert keys == {key for key in SERVED if key < 1000}
        assert [x["node_id"] for x in s.call(BROKER_METADATA, 0, {"node_ids": []}).body["brokers"]] == [
            b.broker_id]


@pytest.mark.parametrize(("name", "version"), [
    ("", "1.0"), ("kafkapy-tests", ""), ("bad name", "1.0"), ("-leading", "1"), ("trailing.", "1"),
    ("ok", "1.0 beta"), ("ok", "1_0"), ("ünïcode", "1"),
])
@pytest.mark.parametrize("api_version", [3, 4])
def test_api_versions_v3_validates_client_software(conn: KafkaSocket, name: str, version: str,
                                                    api_version: int) -> None:
    body = {"client_software_name": name, "client_software_version": version}
    response = conn.call(API_VERSIONS, api_version, body)
    assert response.api_version == api_version
    assert response.body["error_code"] == 42  # INVALID_REQUEST, in the version asked for
    assert_serves(conn)


@pytest.mark.parametrize(("name", "version"), [("a", "1"), ("apache-kafka.java", "3.7.0-SNAPSHOT"),
                                               ("librdkafka", "2.3.0")])
def test_api_versions_v3_accepts_kafka_valid_software(conn: KafkaSocket, name: str, version: str) -> None:
    response = conn.call(API_VERSIONS, 3, {"client_software_name": name, "client_software_version": version})
    assert response.body["error_code"] == 0


@pytest.mark.parametrize("version", [5, 127, 32767, -1])
def test_api_versions_at_an_unsupported_version_gets_a_v0_error_body(conn: KafkaSocket,
                                                                     version: int) -> None:
    conn.send_body(raw_header(API_VERSIONS, version, 991, b"\x00"))
    # Response header v0 (just the correlation id), then the v0 body: error 35, one key 18 0..4.
    expected_body = struct.pack(">ihi", 991, 35, 1) + struct.pack(">hhh", API_VERSIONS, 0, 4)
    assert read_raw_frame(conn) == struct.pack(">i", len(expected_body)) + expected_body
    assert decode_response(expected_body, API_VERSIONS, 0).body["error_code"] == 35
    assert_serves(conn)


# --- unknown requests ---------------------------------------------------------------------------


@pytest.mark.parametrize(("api_key", "api_version"), [
    (4242, 0),  # no such key anywhere
    (-1, 0),
    (32767, 3),
    (ApiKey.CONTROLLED_SHUTDOWN, 3),  # a real Kafka API (inter-broker) this broker does not serve
    (METADATA, 14),  # unsupported versions of served APIs
    (METADATA, 99),
    (METADATA, -1),
    (DESCRIBE_CLUSTER, 3),
    (BROKER_METADATA, 1),
])
def test_unknown_request_gets_an_empty_response_and_the_connection_stays_open(
        conn: KafkaSocket, api_key: int, api_version: int) -> None:
    conn.send_body(raw_header(api_key, api_version, 7_000_001, b"garbage\x00\xff"))
    assert read_raw_frame(conn) == empty_response(7_000_001)
    assert_serves(conn)
    conn.send_body(raw_header(api_key, api_version, -5))
    assert read_raw_frame(conn) == empty_response(-5)
    assert_serves(conn)


def test_unknown_request_behavior_close() -> None:
    with Broker({"unknown.request.behavior": "close"}) as b:
        for api_key, api_version in [(4242, 0), (METADATA, 99), (ApiKey.CONTROLLED_SHUTDOWN, 3)]:
            with KafkaSocket(b.bootstrap_servers) as s:
                assert_serves(s)
                s.send_body(raw_header(api_key, api_version, 5))
                assert s.wait_closed() == b""
        with KafkaSocket(b.bootstrap_servers) as s:  # ApiVersions still negotiates down
            s.send_body(raw_header(API_VERSIONS, 127, 6))
            assert decode_response(s.read_frame(), API_VERSIONS, 0).body["error_code"] == 35
            assert_serves(s)


# --- framing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [-1, -2147483648, 104857601, 2147483647])
def test_bad_frame_sizes_close_before_the_body_is_read(broker: Broker, size: int) -> None:
    with KafkaSocket(broker.bootstrap_servers) as s:
        s.send_raw(struct.pack(">i", size))
        assert s.wait_closed() == b""
    with KafkaSocket(broker.bootstrap_servers) as s:
        assert_serves(s)


def test_frame_size_limit_is_socket_request_max_bytes() -> None:
    limit = 256
    with Broker({"socket.request.max.bytes": str(limit)}) as b:
        with KafkaSocket(b.bootstrap_servers) as s:
            padded = encode_request(API_VERSIONS, 0, 1, "x" * (limit - 10), {})
            assert len(padded) == limit
            s.send_body(padded)  # exactly the limit: served
            assert decode_response(s.read_frame(), API_VERSIONS, 0).body["error_code"] == 0
        with KafkaSocket(b.bootstrap_servers) as s:
            s.send_raw(struct.pack(">i", limit + 1))  # one more: closed without reading on
            assert s.wait_closed() == b""
        with KafkaSocket(b.bootstrap_servers) as s:
            # A valid request followed by an oversized one in the same write: first answered, then closed.
            s.send_raw(request_frame(API_VERSIONS, 0, 3) + struct.pack(">i", limit + 1))
            assert decode_response(s.read_frame(), API_VERSIONS, 0).correlation_id == 3
            assert s.wait_closed() == b""


@pytest.mark.parametrize("size", [0, 3, 7])
def test_frames_too_short_for_a_header_close_the_connection(conn: KafkaSocket, size: int) -> None:
    conn.send_raw(frame(b"\x00" * size))
    assert conn.wait_closed() == b""


def test_pipelined_requests_are_answered_in_order(conn: KafkaSocket) -> None:
    kinds = []
    data = bytearray()
    for i in range(50):
        correlation_id = 1000 + i
        kind = i % 5
        if kind == 0:
            data += request_frame(API_VERSIONS, i % 5, correlation_id, software(i % 5))
            kinds.append((API_VERSIONS, i % 5))
        elif kind == 1:
            data += request_frame(METADATA, i % 14, correlation_id, {"topics": [{"name": f"t{i}"}]})
            kinds.append((METADATA, i % 14))
        elif kind == 2:
            data += frame(raw_header(4000 + i, 0, correlation_id))
            kinds.append((None, 0))
        elif kind == 3:
            data += request_frame(DESCRIBE_CLUSTER, i % 3, correlation_id)
            kinds.append((DESCRIBE_CLUSTER, i % 3))
        else:
            data += frame(raw_header(METADATA, 50, correlation_id))
            kinds.append((None, 0))
    conn.send_raw(bytes(data))  # one write
    for i, (key, version) in enumerate(kinds):
        raw = conn.read_frame()
        if key is None:
            assert raw == struct.pack(">i", 1000 + i)
        else:
            response = decode_response(raw, key, version)
            assert response.correlation_id == 1000 + i
            assert response.body.get("error_code", 0) == 0
    assert_serves(conn)


def test_long_pipeline_beyond_the_read_pause_threshold(conn: KafkaSocket) -> None:
    count = 400  # far more than the connection queues before it pauses reading
    data = b"".join(request_frame(METADATA, 1 + i % 12, i, {"topics": [{"name": f"topic-{i}"}]})
                    for i in range(count))
    sender = threading.Thread(target=conn.send_raw, args=(data,))
    sender.start()
    for i in range(count):
        response = conn.read_response(METADATA, 1 + i % 12)
        assert response.correlation_id == i
        assert response.body["topics"][0]["name"] == f"topic-{i}"
    sender.join(10)
    assert_serves(conn)


def test_requests_split_across_writes_byte_by_byte(conn: KafkaSocket) -> None:
    data = request_frame(METADATA, 12, 77, {"topics": None}) + request_frame(API_VERSIONS, 1, 78)
    for i in range(len(data)):
        conn.send_raw(data[i:i + 1])
    assert conn.read_response(METADATA, 12).correlation_id == 77
    assert conn.read_response(API_VERSIONS, 1).correlation_id == 78


def test_unparseable_body_closes_only_that_connection(broker: Broker,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    with KafkaSocket(broker.bootstrap_servers) as good, KafkaSocket(broker.bootstrap_servers) as bad:
        assert_serves(good)
        assert_serves(bad)
        bad_host, bad_port = bad.sock.getsockname()[:2]
        with caplog.at_level(logging.WARNING, logger="kafkapy"):
            # Metadata v1: a topics array that claims 5 entries and then ends.
            bad.send_body(raw_header(METADATA, 1, 42, struct.pack(">i", 5)))
            assert bad.wait_closed() == b""
        message = next(r.getMessage() for r in caplog.records if "cannot parse" in r.getMessage())
        assert f"{bad_host}:{bad_port}" in message
        assert "api key 3" in message and "v1" in message
        assert_serves(good)
        good.call(METADATA, 1, {"topics": []})
    with KafkaSocket(broker.bootstrap_servers) as fresh:
        assert_serves(fresh)


def test_api_versions_with_an_unparseable_body_closes(conn: KafkaSocket) -> None:
    conn.send_body(raw_header(API_VERSIONS, 3, 9, b"\x05"))  # compact string claims 4 bytes, has none
    assert conn.wait_closed() == b""


# --- idle connections ----------------------------------------------------------------------------


# connections.max.idle.ms of idle_broker, in seconds: a test thread held up this long between two
# requests (a loaded machine) would see its connection closed, so not a few hundred milliseconds.
IDLE_S = 1.0


@pytest.fixture(scope="module")
def idle_broker() -> Iterator[Broker]:
    with Broker({"connections.max.idle.ms": str(int(IDLE_S * 1000))}) as b:
        yield b


def _time_to_close(s: KafkaSocket) -> float:
    start = time.monotonic()
    assert s.wait_closed(timeout=IDLE_S + 5) == b""
    return time.monotonic() - start


def _closed_when_idle(seconds: float) -> bool:
    """Not before the idle time (less a little: the broker's clock starts at its last read), and then soon."""
    return IDLE_S - 0.2 < seconds < IDLE_S + 3


def test_idle_connection_is_closed(idle_broker: Broker) -> None:
    with KafkaSocket(idle_broker.bootstrap_servers) as s:
        assert_serves(s)
        assert _closed_when_idle(_time_to_close(s))


def test_connection_never_used_is_closed(idle_broker: Broker) -> None:
    with KafkaSocket(idle_broker.bootstrap_servers) as s:
        assert _closed_when_idle(_time_to_close(s))


@pytest.mark.parametrize("partial", [b"\x00\x00", b"\x00\x00\x00\x30", request_frame(METADATA, 1, 1)[:-1]],
                         ids=["half-size", "size-only", "all-but-one-byte"])
def test_stalled_partial_frame_counts_as_idle(idle_broker: Broker, partial: bytes) -> None:
    with KafkaSocket(idle_broker.bootstrap_servers) as s:
        s.send_raw(partial)
        assert _closed_when_idle(_time_to_close(s))


def test_activity_keeps_a_connection_open(idle_broker: Broker) -> None:
    with KafkaSocket(idle_broker.bootstrap_servers) as s:
        deadline = time.monotonic() + 3 * IDLE_S
        while time.monotonic() < deadline:
            assert_serves(s)
            time.sleep(0.1)
        assert_serves(s)


# --- Metadata, DescribeCluster, BrokerMetadata ------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Broker, Broker]]:
    store = MemoryStore()
    # These tests pin Metadata's answers for topics that do not exist: no auto-creation (Kafka's
    # default, which tests/dataplane covers).
    off = {"auto.create.topics.enable": "false"}
    first_config = {"broker.id": "1", "broker.rack": "rack-a", "tag.rack": "r8a9", **off}
    with Broker(first_config, store=store) as first, \
            Broker({"broker.id": "2", "tag.rack": "r2", **off}, store=store) as second:
        yield first, second


def _endpoints(cluster: tuple[Broker, Broker]) -> dict[int, tuple[str, int]]:
    return {b.broker_id: split_address(b.bootstrap_servers) for b in cluster}


def _cluster_id_ok(cluster_id: str) -> None:
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
    assert len(cluster_id) == 22


@pytest.mark.parametrize("version", list(range(14)))
def test_metadata_every_version_lists_both_brokers(cluster: tuple[Broker, Broker], version: int) -> None:
    endpoints = _endpoints(cluster)
    cluster_ids = set()
    for b in cluster:
        with KafkaSocket(b.bootstrap_servers) as s:
            topics = [{"name": "nope"}, {"name": "neither"}]
            body = s.call(METADATA, version, {"topics": topics}).body
            assert {x["node_id"]: (x["host"], x["port"]) for x in body["brokers"]} == endpoints
            if version >= 1:
                assert body["controller_id"] == 1
                racks = {x["node_id"]: x["rack"] for x in body["brokers"]}
                assert racks == {1: "rack-a", 2: None}
            if version >= 2:
                cluster_ids.add(body["cluster_id"])
            assert [(t["name"], t["error_code"]) for t in body["topics"]] == [("nope", 3), ("neither", 3)]
            # "all topics": none exist yet
            everything = {"topics": []} if version == 0 else {"topics": None}
            assert s.call(METADATA, version, everything).body["topics"] == []
    if version >= 2:
        assert len(cluster_ids) == 1
        _cluster_id_ok(cluster_ids.pop())


def test_metadata_v0_and_v13_wire_shape(cluster: tuple[Broker, Broker]) -> None:
    first, _ = cluster
    with KafkaSocket(first.bootstrap_servers) as s:
        v0 = s.call(METADATA, 0, {"topics": []}).body
        assert set(v0) == {"brokers", "topics"}
        v13 = s.call(METADATA, 13, {"topics": None}).body
        assert v13["error_code"] == 0 and v13["throttle_time_ms"] == 0
        assert v13["cluster_id"] == first.store.cluster_id()  # type: ignore[union-attr]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(cluster: tuple[Broker, Broker], version: int) -> None:
    endpoints = _endpoints(cluster)
    for b in cluster:
        with KafkaSocket(b.bootstrap_servers) as s:
            body = s.call(DESCRIBE_CLUSTER, version, {}).body
            assert body["error_code"] == 0
            assert {x["broker_id"]: (x["host"], x["port"]) for x in body["brokers"]} == endpoints
            assert body["controller_id"] == 1
            _cluster_id_ok(body["cluster_id"])
            assert body["cluster_id"] == b.store.cluster_id()  # type: ignore[union-attr]
            if version >= 2:
                assert not any(x["is_fenced"] for x in body["brokers"])


def _broker_metadata(s: KafkaSocket, node_ids: list[int]) -> dict[int, dict[str, object]]:
    body = s.call(BROKER_METADATA, 0, {"node_ids": node_ids}).body
    return {x["node_id"]: x for x in body["brokers"]}


def test_broker_metadata_filters(cluster: tuple[Broker, Broker]) -> None:
    first, second = cluster
    with KafkaSocket(first.bootstrap_servers) as s:
        assert set(_broker_metadata(s, [])) == {1, 2}
        assert set(_broker_metadata(s, [-1])) == {1}
        assert set(_broker_metadata(s, [2])) == {2}
        assert set(_broker_metadata(s, [-1, 2])) == {1, 2}
        assert set(_broker_metadata(s, [99])) == set()
    with KafkaSocket(second.bootstrap_servers) as s:
        assert set(_broker_metadata(s, [-1])) == {2}
        answer = _broker_metadata(s, [])
        host, port = split_address(first.bootstrap_servers)
        assert (answer[1]["host"], answer[1]["port"]) == (host, port)


def test_broker_metadata_tags(cluster: tuple[Broker, Broker]) -> None:
    first, _ = cluster
    host, port = split_address(first.bootstrap_servers)
    with KafkaSocket(first.bootstrap_servers) as s:
        entry = _broker_metadata(s, [-1])[1]
    assert (entry["host"], entry["port"]) == (host, port)
    assert 1 <= entry["protocol_version_min"] <= entry["protocol_version_max"]  # type: ignore[operator]
    tags = {t["key"]: t["value"] for t in entry["tags"]}  # type: ignore[attr-defined]
    assert tags["broker.id"] == "1"
    assert tags["broker.version"].startswith("kafkapy-")
    assert tags["broker.version.int"].startswith("0x") and len(tags["broker.version.int"]) == 10
    int(tags["broker.version.int"], 16)
    assert tags["compression.codecs"]
    assert tags["message.max.bytes"] == "1048588"
    assert tags["message.formats"]
    assert tags["endpoints"] == f"plaintext://{host}:{port}"
    assert tags["rack"] == "r8a9"
    assert {"broker.id", "broker.version", "broker.version.int", "compression.codecs", "message.max.bytes",
            "message.formats", "endpoints", "rack"} <= set(tags)


def test_broker_metadata_reports_other_brokers_user_tags(cluster: tuple[Broker, Broker]) -> None:
    first, _ = cluster
    with KafkaSocket(first.bootstrap_servers) as s:
        entry = _broker_metadata(s, [2])[2]
    assert {t["key"]: t["value"] for t in entry["tags"]}.get("rack") == "r2"  # type: ignore[attr-defined]


def test_broker_metadata_user_tags(broker: Broker, conn: KafkaSocket) -> None:
    entry = _broker_metadata(conn, [])[broker.broker_id]
    tags = {t["key"]: t["value"] for t in entry["tags"]}  # type: ignore[attr-defined]
    assert tags["rack"] == "r8a9" and tags["team"] == "streams"
    assert tags["aws.zone"] == "eu-central-1"  # the draft's own example: the name after "tag." as is


def test_broker_metadata_reports_the_message_max_bytes_in_force() -> None:
    """The KIP-35 draft's ``message.max.bytes`` tag is there so clients align with the broker's
    limit: it is the value in force, a dynamic change (cluster default, then this broker's own)
    included, as DescribeConfigs reports it. It used to stay the static setting."""
    def tag(s: KafkaSocket) -> str:
        (entry,) = _broker_metadata(s, [-1]).values()
        return {t["key"]: t["value"] for t in entry["tags"]}["message.max.bytes"]  # type: ignore[attr-defined]

    def alter(s: KafkaSocket, resource: str, value: str) -> None:
        body = s.call(44, 1, {"validate_only": False, "resources": [
            {"resource_type": 4, "resource_name": resource,
             "configs": [{"name": "message.max.bytes", "config_operation": 0, "value": value}]}]}).body
        assert [r["error_code"] for r in body["responses"]] == [0]

    with Broker({"broker.id": "5", "message.max.bytes": "1000000"}) as b, \
            KafkaSocket(b.bootstrap_servers) as s:
        assert tag(s) == "1000000"
        alter(s, "", "2000000")  # the cluster-wide default
        assert tag(s) == "2000000"
        alter(s, "5", "3000000")  # this broker's own, over the default
        assert tag(s) == "3000000"


def test_cluster_survives_a_broker_leaving() -> None:
    store = MemoryStore()
    with Broker({"broker.id": "5"}, store=store) as first:
        with Broker({"broker.id": "6"}, store=store):
            pass
        with KafkaSocket(first.bootstrap_servers) as s:
            body = s.call(METADATA, 12, {"topics": None}).body
            assert [x["node_id"] for x in body["brokers"]] == [5]
            assert body["controller_id"] == 5


def test_closed_errors_are_reported(conn: KafkaSocket) -> None:
    conn.send_raw(struct.pack(">i", -1))
    with pytest.raises(Closed):
        conn.read_frame()


# --- answers are not held behind a slow request ------------------------------------------------------


def test_an_answer_is_not_held_back_by_a_slower_request_behind_it() -> None:
    """Responses are batched per loop step, but a handler that waits lets the batch go out: the
    ApiVersions answer arrives while the DescribeCluster pipelined after it is still held."""
    with Broker(modules=[HeldDescribeCluster]) as b, KafkaSocket(b.bootstrap_servers) as s:
        release = held(b).release
        try:
            first = s.send(API_VERSIONS, 3, SOFTWARE)
            second = s.send(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
            assert s.read_response(API_VERSIONS, 3).correlation_id == first
            assert nothing_to_read(s.sock), "the held request was answered"
            release.set()
            assert s.read_response(DESCRIBE_CLUSTER, 0).correlation_id == second
        finally:
            release.set()


# --- graceful shutdown -------------------------------------------------------------------------------


def test_graceful_shutdown_finishes_in_flight_requests() -> None:
    """While a request is in flight the stopping broker accepts no more connections; the request
    is answered (within the stop's grace), then its connection is closed."""
    b = Broker(modules=[HeldMetadata]).__enter__()
    address = b.bootstrap_servers
    s = KafkaSocket(address)
    hold = held(b)
    try:
        correlation_id = s.send(METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
        assert hold.entered.wait(5)
        closer = threading.Thread(target=b.close)
        closer.start()

        def refused() -> bool:  # stops accepting while the request is still held
            try:
                socket.create_connection(split_address(address), timeout=0.2).close()
            except OSError:
                return True
            return False

        wait_until(refused, 4, "the broker to stop accepting connections while stopping")
        assert closer.is_alive() and not hold.release.is_set()
        hold.release.set()
        response = s.read_response(METADATA, 12)  # the in-flight request is answered ...
        assert response.correlation_id == correlation_id
        assert response.body["topics"][0]["error_code"] == 3
        assert s.wait_closed() == b""  # ... then the connection is closed
        closer.join(10)
        assert not closer.is_alive()
    finally:
        hold.release.set()
        s.close()
        b.close()
