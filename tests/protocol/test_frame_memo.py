"""The memo of repeated frames (kafkapy.protocol.frame_memo) answers what the plain decoders do.

The bound decoders of the capture rows (``request_json_decoder``,
``response_json_decoder``) answer a frame seen before from what it decoded to.
These tests hold them to ``decode_request_json`` and ``decode_response_json``
frame for frame, on runs of drawn frames that repeat with other correlation
ids (and client ids, and mutated bytes that do not decode), with the memo
emptied by its budget now and then; and check that an answer handed out can be
changed without changing the next one, and that messages with records are
never kept.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_json_decoder import CASES, SETTINGS, _frames

from kafkapy.errors import DecodeError
from kafkapy.protocol import encode_request, encode_response, frame_memo
from kafkapy.protocol.codec import (
    decode_request_json,
    decode_response_json,
    message_schema,
    request_json_decoder,
    response_json_decoder,
)
from kafkapy.protocol.frame_memo import FrameMemo, carries_records
from kafkapy.protocol.json_decoder import json_decoder_source


def _answer(decode: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """A decoder's answer as comparable values: the whole named tuple, or the error's details."""
    try:
        r = decode(*args, **kwargs)
    except DecodeError as exc:
        return ("error", type(exc), str(exc), exc.offset, exc.field, exc.truncated, exc.api_key,
                exc.api_version)  # fmt: skip
    return ("ok", type(r), tuple(r), type(r.body))


def _recorrelated(kind: str, frame: bytes, correlation_id: int) -> bytes:
    """The frame with another correlation id (bytes 4-8 of a request, 0-4 of a response)."""
    at = 4 if kind == "request" else 0
    if len(frame) < at + 4:
        return frame
    return frame[:at] + struct.pack(">i", correlation_id) + frame[at + 4 :]


@settings(SETTINGS, max_examples=300)
@given(
    pool=st.lists(_frames(), min_size=1, max_size=4),
    picks=st.lists(
        st.tuples(st.integers(0, 3), st.integers(-(2**31), 2**31 - 1), st.integers(0, 9)), max_size=24
    ),
    budget=st.sampled_from([frame_memo.BUDGET, 600, 0]),
    data=st.data(),
)
def test_repeated_frames_answer_as_the_plain_decoders(
    pool: list[tuple[str, int, int, bytes]],
    picks: list[tuple[int, int, int]],
    budget: int,
    data: st.DataObject,
) -> None:
    bound = {d: (request_json_decoder(d), response_json_decoder(d)) for d in (True, False)}
    # A cut or flipped copy of a pooled frame: kept out of the memo when it does not decode.
    broken = [(kind, key, version, frame[: data.draw(st.integers(0, len(frame)))])
              for kind, key, version, frame in pool]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_memo, "BUDGET", budget)
        for index, correlation_id, how in picks:
            kind, key, version, frame = (pool if how else broken)[index % len(pool)]
            frame = _recorrelated(kind, frame, correlation_id)
            for decode_records, (requests, responses) in bound.items():
                if kind == "request":
                    expected = _answer(decode_request_json, frame, decode_records=decode_records)
                    assert _answer(requests, frame) == expected
                else:
                    plain = _answer(decode_response_json, frame, key, version, decode_records=decode_records)
                    assert _answer(responses, frame, key, version) == plain


def test_a_repeat_is_answered_without_decoding_again() -> None:
    calls: list[bytes] = []

    def counted(buf: bytes) -> Any:
        calls.append(buf)
        return decode_request_json(buf)

    decode = FrameMemo().requests(counted)
    frames = [encode_request(12, 4, c, "client", {"group_id": "g", "member_id": "m"}) for c in (1, 2, 3)]
    answers = [decode(f) for f in frames]
    assert len(calls) == 1
    assert answers == [decode_request_json(f) for f in frames]
    assert [a.correlation_id for a in answers] == [1, 2, 3]


def test_an_answer_changed_by_its_reader_leaves_the_next_alone() -> None:
    decode = request_json_decoder()
    frame = encode_request(3, 12, 1, "c", {"topics": [{"name": "orders"}, {"name": "audit"}]})
    first = decode(frame)
    first.body.topics.append("mine")
    again = decode(frame)
    assert again.body.topics == ["orders", "audit"]
    again.body.topics.clear()
    assert decode(frame) == decode_request_json(frame)


def test_frames_over_the_limit_and_short_frames_are_decoded_every_time() -> None:
    calls: list[bytes] = []

    def counted(buf: bytes) -> Any:
        calls.append(buf)
        return decode_response_json(buf, 18, 3)

    decode = FrameMemo().responses(counted)
    entries = [{"api_key": k, "min_version": 0, "max_version": 1} for k in range(frame_memo.MAX_FRAME // 7)]
    big = encode_response(18, 3, 1, {"api_keys": entries})
    assert len(big) > frame_memo.MAX_FRAME
    for frame in (big, big, big[:3], big[:3]):
        try:
            decode(frame)
        except DecodeError:
            pass
    assert len(calls) == 4


@pytest.mark.parametrize("key, kind, version", CASES)
def test_carries_records_exactly_where_records_are_written(key: int, kind: str, version: int) -> None:
    source, _ = json_decoder_source(message_schema(key, kind, version).root, True)
    assert carries_records(message_schema(key, kind, version).root) == ("_records_at(" in source)


def test_messages_with_records_are_not_kept() -> None:
    assert carries_records(message_schema(0, "request", 9).root)
    assert carries_records(message_schema(1, "response", 12).root)
    assert not carries_records(message_schema(1, "request", 12).root)
    kept: list[bytes] = []
    keep = FrameMemo._keep

    def recording(self: FrameMemo, table: dict[bytes, Any], key: bytes, answer: Any, size: int) -> None:
        kept.append(key)
        keep(self, table, key, answer, size)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FrameMemo, "_keep", recording)
        requests, responses = request_json_decoder(), response_json_decoder()
        produce = encode_request(0, 9, 1, "p", {"acks": 1, "timeout_ms": 1, "topic_data": []})
        fetched = encode_response(1, 12, 1, {"responses": []})
        heartbeat = encode_request(12, 4, 1, "c", {"group_id": "g", "member_id": "m"})
        for _ in range(2):
            requests(produce)
            responses(fetched, 1, 12)
            requests(heartbeat)
    assert kept == [heartbeat[8:]]
