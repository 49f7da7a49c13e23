"""The chunked response encoder (kafkapy.protocol.chunks) against the plain one: equal bytes, at
every Fetch version, for random bodies; and the record chunks are the caller's own buffers."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import encode_response, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.chunks import RecordChunks, encode_response_chunks, frame_size, joined
from kafkapy.protocol.codec import decode_response

FETCH_VERSIONS = range(4, 19)

chunk = st.tuples(st.binary(max_size=300), st.booleans()).map(
    lambda drawn: memoryview(bytearray(drawn[0])) if drawn[1] else drawn[0])
records = st.one_of(st.builds(RecordChunks, st.lists(chunk, max_size=4)), st.binary(max_size=40))
partition = st.fixed_dictionaries({
    "partition_index": st.integers(0, 2**31 - 1),
    "error_code": st.sampled_from([0, 1, 3, 6]),
    "high_watermark": st.integers(-1, 2**63 - 1),
    "last_stable_offset": st.integers(-1, 2**63 - 1),
    "log_start_offset": st.integers(-1, 2**63 - 1),
    "records": records,
})
names = st.text("abcXYZ._-09", min_size=1, max_size=20)


@st.composite
def fetch_response(draw: st.DrawFn, version: int) -> dict[str, Any]:
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        topic: dict[str, Any] = {"partitions": draw(st.lists(partition, max_size=3))}
        if version >= 13:
            topic["topic_id"] = uuid.UUID(bytes=draw(st.binary(min_size=16, max_size=16)))
        else:
            topic["topic"] = draw(names)
        topics.append(topic)
    body: dict[str, Any] = {"throttle_time_ms": draw(st.integers(0, 1000)), "responses": topics}
    if version >= 7:
        body["session_id"] = draw(st.integers(0, 2**31 - 1))
    return body


@settings(max_examples=300, deadline=None)
@given(data=st.data(), version=st.sampled_from(FETCH_VERSIONS), correlation_id=st.integers(0, 2**31 - 1))
def test_chunked_fetch_response_equals_the_plain_encoding(data: st.DataObject, version: int,
                                                          correlation_id: int) -> None:
    body = fit_body(ApiKey.FETCH, "response", version, data.draw(fetch_response(version)))
    chunks = encode_response_chunks(ApiKey.FETCH, version, correlation_id, body)
    plain = encode_response(ApiKey.FETCH, version, correlation_id, body)
    assert b"".join(chunks) == plain
    assert frame_size(chunks) == len(plain)
    assert encode_response(ApiKey.FETCH, version, correlation_id, joined(body)) == plain


def test_record_chunks_are_the_callers_buffers_at_every_version() -> None:
    stored = bytearray(b"\x01" * 5000)
    views = [memoryview(stored)[:3000], memoryview(stored)[3000:]]
    for version in FETCH_VERSIONS:
        topic = {"topic_id": uuid.uuid4()} if version >= 13 else {"topic": "t"}
        body = {"responses": [{**topic, "partitions": [
            {"partition_index": 0, "records": RecordChunks(views)}]}]}
        chunks = encode_response_chunks(ApiKey.FETCH, version, 7, body)
        assert any(c is views[0] for c in chunks) and any(c is views[1] for c in chunks)
        response = decode_response(b"".join(chunks), ApiKey.FETCH, version)
        assert bytes(response.body["responses"][0]["partitions"][0]["records"].raw) == bytes(stored)


def test_a_body_without_chunks_is_one_buffer() -> None:
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": b""}]}]}
    assert encode_response_chunks(ApiKey.FETCH, 4, 1, body) == [encode_response(ApiKey.FETCH, 4, 1, body)]
