"""kafkapy.capture.pairing: its shortcuts against the general path.

The header-level Pairer reads request headers with the protocol's peek and
pairs a response with a connection's one waiting request without the
general search. Here both are checked against what they stand in for: the
RequestHeader schema alone (decode_request_header_plain), and the pairing rule itself (a
response answers the oldest waiting request with its correlation id, and
every request sent before that one is unanswered), run as a plain model.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkapy.protocol
from kafkapy.capture import Frame, FrameReader
from kafkapy.capture.frames import FrameEvent
from kafkapy.capture.pairing import Exchange, Pairer, pair_frames
from kafkapy.capture.tcp import Connection, ConnectionClosed, Endpoint
from kafkapy.protocol import RequestHeader, encode_request, encode_response
from kafkapy.protocol.header import decode_request_header_plain

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap*"))


def _bench_capture(tmp_path: Path) -> Path:
    from benchmarks.capture import generate

    paths, _ = generate(tmp_path, 1, files=1)
    return paths[0]


class _Decoder:
    """kafkapy.protocol's decoders behind methods of their own, with headers read by the
    RequestHeader schema alone (no peek)."""

    def decode_request_header(self, frame_body: bytes) -> RequestHeader:
        return decode_request_header_plain(frame_body)

    def decode_request(self, frame_body: bytes) -> Any:
        return kafkapy.protocol.decode_request(frame_body)

    def decode_response(self, frame_body: bytes, api_key: int, api_version: int) -> Any:
        return kafkapy.protocol.decode_response(frame_body, api_key, api_version)


def _general(**kw: Any) -> Pairer:
    """A Pairer that reads no header by hand."""
    return Pairer(_Decoder(), **kw)


def _key(x: Exchange) -> tuple[Any, ...]:
    """An exchange with its errors as text (DecodeError instances do not compare equal)."""
    assert len(x) == len(Exchange._fields)  # built whole, even where built without Exchange()
    return (x.conn.id, x.status, x.request_frame, x.response_frame, x.header, x.request, x.response,
            str(x.request_error), str(x.response_error), x.paired_by, x.ended_by, x.lost_after)  # fmt: skip


@pytest.mark.parametrize("path", [*CAPTURE_FILES, None], ids=lambda p: p.name if p else "bench-mix")
def test_header_level_pairing_matches_the_general_decoder(path: Path | None, tmp_path: Path) -> None:
    path = path or _bench_capture(tmp_path)
    events = list(FrameReader(path))
    for frame in events:
        if isinstance(frame, Frame):
            assert len(frame) == len(Frame._fields)
    fast = [_key(x) for x in pair_frames(events, Pairer(bodies=()))]
    general = [_key(x) for x in pair_frames(events, _general(bodies=()))]
    assert fast == general and fast
    for x in pair_frames(events, Pairer(bodies=())):
        if x.header is not None:
            assert type(x.header) is RequestHeader and len(x.header) == len(RequestHeader._fields)


_CONN = Connection(0, (Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 9092)), 0, "syn", 0.0)


def _frame(offset: int, from_client: bool, body: bytes) -> Frame:
    return Frame(_CONN, 0 if from_client else 1, from_client, offset / 1000, offset / 1000, offset,
                 len(body), body)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 92),
    st.integers(0, 20),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.one_of(st.none(), st.binary(max_size=12), st.text(max_size=8).map(str.encode)),
    st.binary(max_size=6),
)
def test_hand_read_headers_match_decode_request_header(
    key: int, version: int, corr: int, client_id: bytes | None, rest: bytes
) -> None:
    """Any header, plain or not, well formed or not: the hand-read one is the decoder's, or
    the decoder's error."""
    cid = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    body = struct.pack(">hhi", key, version, corr) + cid + rest
    fast = [_key(x) for x in pair_frames([_frame(0, True, body)], Pairer(bodies=()))]
    general = [_key(x) for x in pair_frames([_frame(0, True, body)], _general(bodies=()))]
    assert fast == general
    try:
        expected: RequestHeader | None = decode_request_header_plain(body)
    except kafkapy.protocol.DecodeError:
        expected = None
    (exchange,) = pair_frames([_frame(0, True, body)], Pairer(bodies=()))
    assert exchange.header == expected


def _model(
    conversation: list[tuple[bool, int]], cap: int = 1024
) -> Iterator[tuple[str, int | None, int | None]]:
    """The pairing rule, run on (from_client, correlation id) pairs: ("exchange", request
    offset, response offset), ("unanswered", request offset, None), ("orphan", None,
    response offset). More than ``cap`` requests waiting: the oldest is given up at once."""
    waiting: list[tuple[int, int]] = []  # (offset, correlation id), oldest first
    for offset, (from_client, corr) in enumerate(conversation):
        if from_client:
            waiting.append((offset, corr))
            if len(waiting) > cap:
                yield ("unanswered", waiting.pop(0)[0], None)
            continue
        match = next((i for i, (_, c) in enumerate(waiting) if c == corr), None)
        if match is None:
            yield ("orphan", None, offset)
            continue
        for older, _ in waiting[:match]:
            yield ("unanswered", older, None)
        yield ("exchange", waiting[match][0], offset)
        del waiting[: match + 1]
    for older, _ in waiting:
        yield ("unanswered", older, None)


_REQUEST = {"topics": None, "allow_auto_topic_creation": False}
_RESPONSE = {"brokers": [], "cluster_id": "x", "controller_id": 1, "topics": []}


def _exchanges(conversation: list[tuple[bool, int]], header_level: bool) -> list[tuple[str, Exchange]]:
    """Pair one connection's conversation of (from client, correlation id) frames; each exchange with
    its kind: "exchange", "orphan" or "unanswered"."""
    events: list[FrameEvent] = [
        _frame(offset, True, encode_request(3, 12, corr, "c", _REQUEST)) if from_client
        else _frame(offset, False, encode_response(3, 12, corr, _RESPONSE))
        for offset, (from_client, corr) in enumerate(conversation)
    ]  # fmt: skip
    events.append(ConnectionClosed(_CONN, 1.0, "capture-end"))  # as FrameReader ends every connection
    out = []
    for x in pair_frames(events, Pairer(bodies=() if header_level else None)):
        kind = "exchange" if x.request_frame is not None and x.response_frame is not None else (
            "orphan" if x.request_frame is None else "unanswered")  # fmt: skip
        out.append((kind, x))
    return out


def _pairs(
    conversation: list[tuple[bool, int]], header_level: bool
) -> list[tuple[str, int | None, int | None]]:
    """The (kind, request frame offset, response frame offset) of every exchange, as _model gives them."""
    return [
        (kind, None if x.request_frame is None else x.request_frame.offset,
         None if x.response_frame is None else x.response_frame.offset)
        for kind, x in _exchanges(conversation, header_level)
    ]  # fmt: skip


@pytest.mark.parametrize("header_level", [True, False])
@pytest.mark.parametrize("distinct", [1, 3, 2000], ids=lambda n: f"{n}-correlation-ids")
def test_requests_beyond_the_pending_cap_are_given_up_oldest_first(header_level: bool, distinct: int) -> None:
    """1100 requests with no response (acks=0 Produce, say), under few correlation ids or
    many: past 1024 waiting, each new one gives up the oldest; then a few responses."""
    conversation = [(True, i % distinct) for i in range(1100)] + [(False, 1), (False, 2), (False, 1)]
    got = _pairs(conversation, header_level)
    expected = list(_model(conversation))
    assert got == expected
    assert sum(1 for kind, _, _ in expected if kind == "unanswered") >= 1100 - 1024


@pytest.mark.parametrize("header_level", [True, False])
def test_pipelined_requests_pair_in_order(header_level: bool) -> None:
    """Five requests in flight, answered in order, one lost and one answered twice: the rule's
    pairs (the oldest waiting request answered takes its shortcut)."""
    conversation = [(True, c) for c in range(5)] + [(False, c) for c in (0, 1, 3, 3, 4)]
    conversation += [(True, 9), (True, 9), (True, 10), (False, 9), (False, 9), (False, 10)]
    got = _pairs(conversation, header_level)
    assert got == list(_model(conversation))
    assert ("unanswered", 2, None) in got and ("orphan", None, 8) in got


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4)), max_size=30), st.booleans())
def test_pairing_follows_the_rule(conversation: list[tuple[bool, int]], header_level: bool) -> None:
    """Requests, duplicates, lost and unknown responses in any order, on one connection: the
    pairs are those of the rule, whichever branch of the Pairer made them."""
    for kind, x in _exchanges(conversation, header_level):
        assert x.status == {"exchange": "ok", "orphan": "orphan_response", "unanswered": "no_response"}[kind]
        if kind == "exchange":
            assert x.response_frame is not None and x.header is not None
            assert x.header.correlation_id == conversation[x.response_frame.offset][1]
            assert x.paired_by == "correlation-id"
            assert (x.request is None) == header_level and (x.response is None) == header_level
    got = _pairs(conversation, header_level)
    assert got == list(_model(conversation))
