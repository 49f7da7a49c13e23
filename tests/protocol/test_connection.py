"""The sans-I/O connection objects: framing, pairing, order, limits and the state table, and two
properties: any split of a valid stream gives the same events, and garbage raises ProtocolError
and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.errors import EncodeError, ErrorCode
from kafkapy.protocol import build_record_batch, decode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.connection import (
    TRANSITIONS,
    ClientConnection,
    ConnectionState,
    ProtocolError,
    SentRequest,
    ServerConnection,
    StateInput,
)

METADATA_RESPONSE = {"brokers": [{"node_id": 1, "host": "h", "port": 9092}], "topics": []}
API_VERSIONS_RESPONSE = {"error_code": 0, "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}]}


def _exchange(client: ClientConnection, server: ServerConnection, api_key: int, version: int,
              body: dict[str, Any], answer: dict[str, Any]) -> bytes:
    """One request through the server object; the response's bytes, not yet fed to the client."""
    [request] = server.receive_data(client.send_request(api_key, version, body))
    return server.send_response(request, answer)


def test_a_request_and_its_response_pair_up_across_header_versions() -> None:
    client, server = ClientConnection("app"), ServerConnection()
    # ApiVersions v3 is flexible but its response header is v0; Metadata v12 uses header v1; v1 uses v0
    stream = b"".join([
        _exchange(client, server, ApiKey.API_VERSIONS, 3, {}, API_VERSIONS_RESPONSE),
        _exchange(client, server, ApiKey.METADATA, 12, {"topics": None}, METADATA_RESPONSE),
        _exchange(client, server, ApiKey.METADATA, 1, {"topics": None}, METADATA_RESPONSE),
    ])
    events = client.receive_data(stream)
    assert [event.request for event in events] == [
        SentRequest(ApiKey.API_VERSIONS, 3, 0), SentRequest(ApiKey.METADATA, 12, 1),
        SentRequest(ApiKey.METADATA, 1, 2)]
    assert [event.response.correlation_id for event in events] == [0, 1, 2]
    assert events[0].response.body.api_keys[0].max_version == 12
    assert events[1].response.body.brokers[0].host == "h"
    assert client.in_flight == () and server.unanswered == ()
    assert stream[:4] == (len(stream[:4 + int.from_bytes(stream[:4], "big")]) - 4).to_bytes(4, "big")


def test_client_id_defaults_to_the_connections_and_can_be_given_per_request() -> None:
    client, server = ClientConnection("default-id"), ServerConnection()
    first = server.receive_data(client.send_request(ApiKey.METADATA, 1, {"topics": None}))
    second = server.receive_data(client.send_request(ApiKey.METADATA, 1, {"topics": None}, client_id="other"))
    assert [first[0].client_id, second[0].client_id] == ["default-id", "other"]


def test_partial_frames_wait_for_their_bytes() -> None:
    client, server = ClientConnection(), ServerConnection()
    data = client.send_request(ApiKey.METADATA, 12, {"topics": [{"name": "t"}]})
    assert server.receive_data(data[:2]) == [] and server.buffered_bytes == 2
    assert server.receive_data(data[2:-1]) == [] and server.buffered_bytes == len(data) - 1
    [request] = server.receive_data(data[-1:])
    assert request.body.topics[0].name == "t" and server.buffered_bytes == 0


def test_records_stay_lazy_and_round_trip() -> None:
    client, server = ClientConnection(), ServerConnection()
    batch = build_record_batch([(b"k", b"v")])
    data = client.send_request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
    [request] = server.receive_data(data)
    records = request.body.topic_data[0].partition_data[0].records
    assert bytes(records.raw) == batch
    assert [(r.key, r.value) for r in records.records()] == [(b"k", b"v")]


def test_a_produce_with_acks_0_awaits_no_response() -> None:
    client, server = ClientConnection(), ServerConnection()
    body = {"acks": 0, "timeout_ms": 1000, "topic_data": []}
    [request] = server.receive_data(client.send_request(ApiKey.PRODUCE, 9, body))
    assert client.in_flight == () and server.unanswered == ()
    with pytest.raises(ProtocolError, match="no request is waiting") as raised:
        server.send_response(request, {"responses": []})
    assert raised.value.remote is False and server.state is ConnectionState.OPEN


def test_a_response_out_of_order_or_unknown_closes_the_client() -> None:
    client, server = ClientConnection(), ServerConnection()
    first = server.receive_data(client.send_request(ApiKey.METADATA, 1, {"topics": None}))[0]
    second = server.receive_data(client.send_request(ApiKey.METADATA, 1, {"topics": None}))[0]
    with pytest.raises(ProtocolError, match="oldest unanswered request is correlation id 0"):
        server.send_response(second, METADATA_RESPONSE)  # the server refuses to answer out of order
    from kafkapy.protocol import encode_response
    wrong = encode_response(ApiKey.METADATA, 1, 1, METADATA_RESPONSE)
    with pytest.raises(ProtocolError, match="responses must come in request order"):
        client.receive_data(len(wrong).to_bytes(4, "big") + wrong)
    assert client.state is ConnectionState.CLOSED
    with pytest.raises(ProtocolError, match="cannot receive on a closed connection: a response with"):
        client.receive_data(server.send_response(first, METADATA_RESPONSE))
    with pytest.raises(ProtocolError, match="cannot send on a closed connection"):
        client.send_request(ApiKey.METADATA, 1, {"topics": None})

    unknown = ClientConnection()
    unknown.send_request(ApiKey.METADATA, 1, {"topics": None})
    stray = encode_response(ApiKey.METADATA, 1, 77, METADATA_RESPONSE)
    with pytest.raises(ProtocolError, match=r"correlation id 77 came where .* no request has that id"):
        unknown.receive_data(len(stray).to_bytes(4, "big") + stray)


def test_a_frame_over_the_limit_is_refused_once_its_size_arrives_after_the_frames_before_it() -> None:
    client, server = ClientConnection(), ServerConnection(max_frame_bytes=100)
    small = client.send_request(ApiKey.METADATA, 1, {"topics": None})
    with pytest.raises(ProtocolError, match=r"frame size 5000 is over max_frame_bytes \(100\)") as raised:
        server.receive_data(small + (5000).to_bytes(4, "big"))
    assert [request.correlation_id for request in raised.value.events] == [0]
    assert server.state is ConnectionState.CLOSED and server.error is raised.value
    with pytest.raises(ProtocolError, match="negative"):
        ServerConnection().receive_data(b"\xff\xff\xff\xfe")


def test_an_undecodable_request_names_the_codecs_error_and_keeps_it_as_cause() -> None:
    server = ServerConnection()
    frame = bytes.fromhex("0003000c00000007")  # Metadata v12, cut after its correlation id
    with pytest.raises(ProtocolError, match=r"a request does not decode: .*Metadata") as raised:
        server.receive_data(len(frame).to_bytes(4, "big") + frame)
    assert raised.value.error_code is ErrorCode.CORRUPT_MESSAGE and raised.value.__cause__ is not None


def test_an_api_versions_request_at_an_unknown_version_is_answered_at_v0_as_kafka_does() -> None:
    """A client newer than the catalogue (ApiVersions v0-4) asks v9: Kafka reads the header, not
    the body, and answers UNSUPPORTED_VERSION with a v0 body so the client retries lower."""
    header = (ApiKey.API_VERSIONS.to_bytes(2, "big") + (9).to_bytes(2, "big") + (5).to_bytes(4, "big")
              + (3).to_bytes(2, "big") + b"new" + b"\x00")  # request header v2: client id, no tags
    frame = header + b"\x07a body v9 may hold"
    server = ServerConnection()
    [request] = server.receive_data(len(frame).to_bytes(4, "big") + frame)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        ApiKey.API_VERSIONS, 9, 5, "new")
    answer = server.send_response(request, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": [
        {"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 4}]})
    response = decode_response(answer[4:], ApiKey.API_VERSIONS, 9)
    assert response.api_version == 0 and response.body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert response.body.api_keys[0].max_version == 4 and response.correlation_id == 5
    # any other API at an unknown version does not decode
    frame = ApiKey.METADATA.to_bytes(2, "big") + (99).to_bytes(2, "big") + header[4:]
    with pytest.raises(ProtocolError, match="Metadata v99 is outside the versions"):
        ServerConnection().receive_data(len(frame).to_bytes(4, "big") + frame)


def test_end_of_stream() -> None:
    client, server = ClientConnection(), ServerConnection()
    data = client.send_request(ApiKey.METADATA, 1, {"topics": None})
    server.receive_data(data[:6])
    with pytest.raises(ProtocolError, match="the stream ended 6 bytes into a frame"):
        server.receive_data(b"")
    with pytest.raises(ProtocolError, match=r"1 request unanswered .*correlation id 0") as raised:
        client.receive_data(b"")
    assert raised.value.error_code is ErrorCode.NETWORK_EXCEPTION
    quiet = ServerConnection()
    assert quiet.receive_data(b"") == [] and quiet.state is ConnectionState.CLOSED
    quiet.close()  # closing twice is allowed


def test_a_body_the_codec_refuses_changes_nothing() -> None:
    client = ClientConnection()
    with pytest.raises(EncodeError, match="no_such_field"):
        client.send_request(ApiKey.METADATA, 1, {"no_such_field": 1})
    assert client.in_flight == () and client.state is ConnectionState.OPEN
    client.send_request(ApiKey.METADATA, 1, {"topics": None})
    assert client.in_flight == (SentRequest(ApiKey.METADATA, 1, 0),)


def _stream() -> tuple[ClientConnection, ServerConnection, bytes, bytes]:
    """A client that sent three requests, the requests' bytes, and the server's answers' bytes."""
    client, server = ClientConnection("split"), ServerConnection()
    batch = build_record_batch([(b"k", b"v")])
    requests = [client.send_request(ApiKey.API_VERSIONS, 3, {"client_software_name": "x"}),
                client.send_request(ApiKey.METADATA, 12, {"topics": [{"name": "a"}]}),
                client.send_request(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 5, "topic_data": [
                    {"name": "a", "partition_data": [{"index": 0, "records": batch}]}]})]
    decoded = server.receive_data(b"".join(requests))
    answers = [API_VERSIONS_RESPONSE, METADATA_RESPONSE, {"responses": [{"name": "a", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0}]}]}]
    responses = b"".join(server.send_response(request, answer) for request, answer in zip(decoded, answers))
    return client, server, b"".join(requests), responses


def _feed(connection: ClientConnection | ServerConnection, data: bytes, cuts: list[int]) -> list[Any]:
    events: list[Any] = []
    start = 0
    for cut in sorted({cut for cut in cuts if cut < len(data)} | {len(data)}):
        events += connection.receive_data(data[start:cut])  # never b"", which would end the stream
        start = cut
    return events


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=30))
def test_any_split_of_a_valid_stream_gives_the_same_events(cuts: list[int]) -> None:
    client, _, requests, responses = _stream()
    whole_client, _, _, _ = _stream()
    assert _feed(client, responses, cuts) == whole_client.receive_data(responses)
    assert _feed(ServerConnection(), requests, cuts) == ServerConnection().receive_data(requests)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.binary(max_size=80), max_size=6), prefix=st.booleans(), end=st.booleans())
def test_garbage_raises_protocol_error_and_nothing_else(data: list[bytes], prefix: bool, end: bool) -> None:
    """Random chunks, alone or after a valid stream's start, into both ends: events or
    ProtocolError, never another exception."""
    client, _, requests, responses = _stream()
    server = ServerConnection(max_frame_bytes=1000)
    chunks_for = {server: ([requests[:20]] if prefix else []) + data,
                  client: ([responses[:20]] if prefix else []) + data}
    for connection, chunks in chunks_for.items():
        try:
            for chunk in chunks + ([b""] if end else []):
                connection.receive_data(chunk)
        except ProtocolError as exc:
            assert str(exc) and connection.state is ConnectionState.CLOSED


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position=st.integers(min_value=0), value=st.integers(min_value=0, max_value=255))
def test_a_mutated_stream_raises_protocol_error_and_nothing_else(position: int, value: int) -> None:
    client, _, requests, responses = _stream()
    for connection, stream in ((client, responses), (ServerConnection(), requests)):
        mutated = bytearray(stream)
        mutated[position % len(mutated)] = value
        try:
            connection.receive_data(bytes(mutated))
        except ProtocolError:
            assert connection.state is ConnectionState.CLOSED


def test_the_docs_example_runs() -> None:
    """docs/protocol.md's connection example, run as written (tests/test_docs_snippets.py only
    compiles the page's blocks)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    section = page[page.index("## Connections: framing"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("\n```")]
    exec(compile(code, "docs/protocol.md", "exec"), {})


def test_the_docs_state_table_is_transitions() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    section = page[page.index("## Connections: framing"):]
    rows = [line.strip("|").split("|") for line in section.splitlines()
            if line.startswith(("| open ", "| closed "))]
    documented = {(ConnectionState(cells[0].strip()), happening): cells[column].strip()
                  for cells in rows for column, happening in enumerate(StateInput, start=1)}
    assert documented == {key: TRANSITIONS[key].value if key in TRANSITIONS else "`ProtocolError`"
                          for key in documented}
    assert len(documented) == len(ConnectionState) * len(StateInput)
