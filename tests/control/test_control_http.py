"""The control endpoint's HTTP layer and address rule: kept-alive connections, chunked bodies (as
Go's and Java's clients send), limits answered with their status, loopback-only addresses."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from kafkapy.control import ControlAddress, ControlAddressError, parse_control_address
from kafkapy.control.http import MAX_BODY_BYTES, MAX_HEAD_BYTES
from kafkapy.embedded import Broker

from .conftest import ControlClient


def test_one_connection_serves_many_requests(controlled: tuple[Broker, ControlClient]) -> None:
    _, control = controlled
    connection = http.client.HTTPConnection(control.host, control.port, timeout=30)
    try:
        for path in ("/health", "/faults", "/cluster", "/nowhere"):
            connection.request("GET", path)
            response = connection.getresponse()
            assert response.getheader("Connection") == "keep-alive"
            json.loads(response.read())
    finally:
        connection.close()


def test_a_chunked_body_is_read(controlled: tuple[Broker, ControlClient]) -> None:
    broker, control = controlled
    connection = http.client.HTTPConnection(control.host, control.port, timeout=30)
    parts = [b'{"chunked": {"partitions": 1, ', b'"records": [{"value": "in pieces"}]}}']
    try:
        connection.request("POST", "/seed", body=iter(parts), encode_chunked=True,
                           headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"})
        response = connection.getresponse()
        assert (response.status, json.loads(response.read())) == (200, {"seeded": ["chunked"], "records": 1})
    finally:
        connection.close()
    assert [r.value for r in broker.records("chunked")] == [b"in pieces"]


def raw_exchange(control: ControlClient, data: bytes) -> bytes:
    with socket.create_connection((control.host, control.port), timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


@pytest.mark.parametrize(("data", "status", "message"), [
    (b"GET /health HTTP/1.1\r\nX: " + b"y" * MAX_HEAD_BYTES + b"\r\n\r\n", 431, "the request head is over"),
    (f"POST /seed HTTP/1.1\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode(), 413, "the body of"),
    (b"POST /seed HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "transfer coding 'gzip'"),
    (b"POST /seed HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "not a chunk size"),
    (b"GET /health HTTP/2\r\n\r\n", 400, "not an HTTP/1.x request line"),
    (b"GET /health HTTP/1.1\r\nno colon\r\n\r\n", 400, "not a header line"),
    (b"GET /health HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length '-1' is not a number"),
    # a superscript two in Latin-1: a digit to str.isdigit, not to int() nor to RFC 9110's DIGIT
    (b"POST /faults HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n", 400,
     "Content-Length '\u00b2' is not a number"),
    (b"GET /heal", 400, "the request head ended early"),
])
def test_unreadable_requests_are_answered_and_closed(controlled: tuple[Broker, ControlClient], data: bytes,
                                                     status: int, message: str) -> None:
    _, control = controlled
    received = raw_exchange(control, data)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()) and b"Connection: close" in head
    assert json.loads(body)["error"].startswith(message)
    assert control.call("GET", "/health")[0] == 200


@pytest.mark.parametrize(("text", "address"), [
    ("127.0.0.1:8080", ControlAddress("127.0.0.1", 8080)),
    ("127.9.9.9:0", ControlAddress("127.9.9.9", 0)),
    ("localhost:0", ControlAddress("localhost", 0)),
    ("[::1]:8080", ControlAddress("::1", 8080)),
])
def test_loopback_addresses_are_accepted(text: str, address: ControlAddress) -> None:
    assert parse_control_address(text) == address


@pytest.mark.parametrize(("text", "message"), [
    ("0.0.0.0:8080", "is not a loopback address"),
    ("[::]:8080", "is not a loopback address"),
    ("10.0.0.1:8080", "is not a loopback address"),
    ("example.com:8080", "is not a loopback address"),
    ("8080", "is not HOST:PORT"),
    ("127.0.0.1:70000", "the port must be in 0-65535"),
])
def test_other_addresses_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ControlAddressError, match=message):
        parse_control_address(text)


def test_allow_remote_accepts_any_host() -> None:
    assert parse_control_address("0.0.0.0:8080", allow_remote=True) == ControlAddress("0.0.0.0", 8080)


def test_stopping_with_a_kept_alive_connection_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    with Broker(control="127.0.0.1:0") as broker:
        assert broker.control is not None and broker.control.bound is not None
        connection = http.client.HTTPConnection(*broker.control.bound, timeout=30)
        connection.request("GET", "/health")
        assert connection.getresponse().read()  # the connection stays open, waiting for the next request
    connection.close()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def test_expect_100_continue_gets_the_go_ahead(controlled: tuple[Broker, ControlClient]) -> None:
    """curl sends ``Expect: 100-continue`` with a body over 1 KiB and waits for it."""
    _, control = controlled
    body = json.dumps({"big": {"partitions": 1, "records": [{"value": "x" * 2000}]}}).encode()
    with socket.create_connection((control.host, control.port), timeout=30) as sock:
        sock.sendall(b"POST /seed HTTP/1.1\r\nConnection: close\r\nExpect: 100-continue\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode())
        assert sock.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert json.loads(received.partition(b"\r\n\r\n")[2]) == {"seeded": ["big"], "records": 1}
