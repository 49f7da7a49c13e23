"""Garbage on some connections never stops the broker serving the others.

Each garbage connection sees, for the complete frames it sent and in their
order, valid responses, empty responses or the ApiVersions fallback, and at
some point may be closed; nothing else. The well-behaved connection opened
after the garbage is always served.

Once the well-behaved connection has been served, each garbage connection is
half-closed and the broker closes it at that end of input (stalled partial
frames closing by connections.max.idle.ms is tests/server/test_raw_socket.py's).
The idle timeout is long: it applies to the well-behaved connection too, and
the 300 ms it was failed a soak run when a loaded machine stalled the test
between that connection's two requests.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from error_log import ErrorCollector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_wire import KafkaSocket, frame, split_address

from kafkapy import Broker
from kafkapy.protocol import decode_response, encode_request

SERVED = {3: (0, 13), 18: (0, 4), 60: (0, 2), 1010: (0, 0)}
IDLE_MS = 5000
SOFTWARE = {"client_software_name": "fuzz", "client_software_version": "1"}


@pytest.fixture(scope="module")
def broker(errors: ErrorCollector) -> Iterator[Broker]:
    with Broker({"connections.max.idle.ms": str(IDLE_MS), "socket.request.max.bytes": "65536"}) as b:
        yield b


def _valid_request(key: int, version: int, correlation_id: int) -> bytes:
    body = SOFTWARE if key == 18 and version >= 3 else {}
    return encode_request(key, version, correlation_id, "fuzz", body)


int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)

header_like = st.builds(
    lambda key, version, cid, tail: struct.pack(">hhi", key, version, cid) + tail,
    st.one_of(st.sampled_from([3, 18, 60, 1010, 0, 1, 4242, -1]), int16),
    st.one_of(st.integers(-1, 16), int16),
    int32,
    st.binary(max_size=48),
)


@st.composite
def mutated_request(draw: st.DrawFn) -> bytes:
    key = draw(st.sampled_from(sorted(SERVED)))
    low, high = SERVED[key]
    data = bytearray(_valid_request(key, draw(st.integers(low, high)), draw(int32)))
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(["flip", "truncate", "append"]))
        if action == "flip" and len(data) > 8:
            position = draw(st.integers(8, len(data) - 1))
            data[position] = draw(st.integers(0, 255))
        elif action == "truncate" and len(data) > 8:
            del data[draw(st.integers(8, len(data))):]
        else:
            data += draw(st.binary(max_size=8))
    return bytes(data)


valid_request = st.builds(
    lambda kv, cid: _valid_request(kv[0], kv[1], cid),
    st.sampled_from([(k, v) for k, (low, high) in SERVED.items() for v in range(low, high + 1)]),
    int32,
)

framed = st.one_of(valid_request, header_like, mutated_request(), st.binary(max_size=12)).map(frame)
bad_size = st.one_of(st.integers(-(2**31), -1), st.integers(65537, 2**31 - 1)).map(struct.Struct(">i").pack)
chunk = st.one_of(framed, framed, framed, st.binary(min_size=1, max_size=64), bad_size)
connection_bytes = st.lists(chunk, min_size=1, max_size=8).map(b"".join)


def _frames(data: bytes) -> list[bytes]:
    """The complete frames the broker can see before a bad size or the end."""
    frames, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        if size < 0 or size > 65536 or pos + 4 + size > len(data):
            break
        frames.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames


def _responses(data: bytes) -> list[bytes]:
    """Complete response frames (a reset may cut the last one short)."""
    responses, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        assert size >= 4, f"response frame of size {size}"
        if pos + 4 + size > len(data):
            break
        responses.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return responses


def _check_response(request: bytes, response: bytes) -> None:
    assert len(request) >= 8, "a frame too short for a header must close the connection, not be answered"
    key, version, correlation_id = struct.unpack_from(">hhi", request)
    assert struct.unpack_from(">i", response)[0] == correlation_id
    low, high = SERVED.get(key, (0, -1))
    if low <= version <= high:
        decoded = decode_response(response, key, version)
        assert decoded.correlation_id == correlation_id
    elif key == 18:
        assert response == struct.pack(">ihihhh", correlation_id, 35, 1, 18, 0, 4)
    else:
        assert response == struct.pack(">i", correlation_id)


def _end_input(s: KafkaSocket) -> bytes:
    """Half-close ``s`` and read what the broker sends until it closes its end."""
    try:
        s.sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the broker closed already
    return s.wait_closed(timeout=IDLE_MS / 1000 + 5)


def _assert_served(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as good:
        assert good.call(18, 3, SOFTWARE).body["error_code"] == 0
        assert good.call(3, 12, {"topics": None}).body["brokers"][0]["node_id"] == broker.broker_id


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.lists(connection_bytes, min_size=1, max_size=4))
def test_garbage_never_stops_a_well_behaved_connection(broker: Broker, errors: ErrorCollector,
                                                       garbage: list[bytes]) -> None:
    sockets = []
    for data in garbage:
        s = KafkaSocket(broker.bootstrap_servers)
        try:
            s.send_raw(data)
        except OSError:
            pass  # the broker closed already
        sockets.append(s)
    _assert_served(broker)
    for s, data in zip(sockets, garbage):
        with s:
            received = _end_input(s)
        requests = _frames(data)
        responses = _responses(received)
        assert len(responses) <= len(requests)
        for request, response in zip(requests, responses):
            _check_response(request, response)
    _assert_served(broker)
    assert errors.messages == []


@settings(max_examples=15, deadline=None)
@given(data=st.binary(min_size=1, max_size=256), split=st.integers(1, 16))
def test_random_bytes_in_pieces(broker: Broker, errors: ErrorCollector, data: bytes, split: int) -> None:
    with KafkaSocket(broker.bootstrap_servers) as s:
        try:
            for i in range(0, len(data), split):
                s.send_raw(data[i:i + split])
        except OSError:
            pass
        _assert_served(broker)
        received = _end_input(s)
    requests = _frames(data)
    responses = _responses(received)
    assert len(responses) <= len(requests)
    for request, response in zip(requests, responses):
        _check_response(request, response)
    assert errors.messages == []


def test_many_garbage_connections_at_once(broker: Broker) -> None:
    """A crowd of half-open, oversized and garbage connections, then a good one."""
    crowd = []
    openings = [b"\x00\x00", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x10\x00\x03", frame(b"\x00" * 9)]
    for i in range(40):
        sock = socket.create_connection(split_address(broker.bootstrap_servers))
        sock.sendall(openings[i % 4])
        crowd.append(sock)
    try:
        _assert_served(broker)
    finally:
        for sock in crowd:
            sock.close()
