"""The request-header peek against the compiled RequestHeader schema: one answer on any bytes.

``peek_request_header`` reads the common header by hand and is what the codec (as its
``decode_request_header``), capture framing and pairing use; ``decode_request_header_plain`` is
the schema alone. Garbage gives DecodeError from
both and nothing else.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import DecodeError
from kafkapy.protocol import catalogue, decode_request_header, encode_request, header
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import request_header_version
from kafkapy.protocol.header import (
    REQUEST_PREFIX_SIZE,
    RequestHeader,
    decode_request_header_plain,
    peek_request_header,
    unpack_request_prefix,
)


def _outcome(read: object, data: bytes | bytearray | memoryview) -> tuple[str, object]:
    """("ok", header) or ("error", (reason, offset, truncated, api key, api version))."""
    try:
        header = read(data)  # type: ignore[operator]
    except DecodeError as exc:
        return "error", (exc.reason, exc.offset, exc.truncated, exc.api_key, exc.api_version)
    assert type(header) is RequestHeader
    return "ok", tuple(header)


def _assert_same(data: bytes) -> None:
    plain = _outcome(decode_request_header_plain, data)
    assert _outcome(peek_request_header, data) == plain
    assert _outcome(peek_request_header, bytearray(data)) == plain
    assert _outcome(peek_request_header, memoryview(data)) == plain


# Keys of every header version: ControlledShutdown v0 (header v0), flexible and not, unknown keys
_KEYS = st.sampled_from([*catalogue(), -1, 4, 93, 500, 32767])
_CLIENT_ID_LENGTHS = st.one_of(st.integers(-3, 40), st.sampled_from([-32768, 32767]))


@st.composite
def _headers(draw: st.DrawFn) -> bytes:
    """Header-shaped bytes: a real prefix and client id length, then anything (a client id of any
    bytes, tag sections well-formed or not), often cut short."""
    key = draw(_KEYS)
    version = draw(st.one_of(st.integers(0, 17), st.integers(-32768, 32767)))
    corr = draw(st.integers(-(2**31), 2**31 - 1))
    n = draw(_CLIENT_ID_LENGTHS)
    rest = draw(st.one_of(
        st.binary(max_size=60),
        st.builds(lambda cid, tags: cid + tags, st.binary(max_size=40),
                  st.sampled_from([b"\x00", b"\x01\x00\x01x", b"\x01\x05\x02ab", b"\x80", b"\x02"])),
    ))
    data = struct.pack(">hhih", key, version, corr, n) + rest
    return data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data


@settings(max_examples=3000, deadline=None)
@given(_headers())
def test_peek_equals_schema_on_header_shaped_bytes(data: bytes) -> None:
    _assert_same(data)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64))
def test_peek_equals_schema_on_any_bytes(data: bytes) -> None:
    _assert_same(data)


@pytest.mark.parametrize("key", sorted(catalogue()))
def test_peek_reads_every_api_at_both_ends_of_its_versions(key: int) -> None:
    api = catalogue()[key]
    for version in (api.versions.low, api.versions.high):
        for client_id in ("peek", None, "ünïcode"):
            frame = encode_request(key, version, 4242, client_id, {})
            header = peek_request_header(frame)
            assert header == decode_request_header_plain(frame)
            assert decode_request_header is peek_request_header
            assert header[:4] == (key, version, 4242, client_id if header.header_version else None)
            assert header.header_version == request_header_version(key, version)
            assert unpack_request_prefix(frame) == (key, version, 4242)


def test_peek_takes_the_schema_path_for_tags_in_the_header() -> None:
    """A v2 header carrying a tagged field is read past the tags, as the schema reads it."""
    frame = struct.pack(">hhih", ApiKey.METADATA, 12, 9, 2) + b"id" + b"\x01\x05\x02ab" + b"body"
    header = peek_request_header(frame)
    assert header == RequestHeader(ApiKey.METADATA, 12, 9, "id", 2, len(frame) - 4)


def test_peek_names_a_short_or_cut_header() -> None:
    with pytest.raises(DecodeError) as short:
        peek_request_header(b"\x00\x03\x00")
    assert short.value.truncated and short.value.offset == 0
    with pytest.raises(DecodeError) as cut:  # a 20-byte client id with 3 bytes of it present
        peek_request_header(struct.pack(">hhih", ApiKey.FETCH, 4, 1, 20) + b"abc")
    assert cut.value.truncated
    assert (cut.value.api_key, cut.value.api_version) == (ApiKey.FETCH, 4)


def test_controlled_shutdown_v0_has_no_client_id() -> None:
    frame = struct.pack(">hhi", ApiKey.CONTROLLED_SHUTDOWN, 0, 5) + b"\x00\x00\x00\x01"
    assert peek_request_header(frame) == RequestHeader(ApiKey.CONTROLLED_SHUTDOWN, 0, 5, None, 0,
                                                       REQUEST_PREFIX_SIZE)


def test_the_header_version_cache_stays_bounded_on_garbage() -> None:
    """Damaged frames carry any key and version: the peek's cache of header versions must not grow
    with them."""
    for key in range(-3000, 3000):
        peek_request_header(struct.pack(">hhih", key, key, 1, -1) + b"\x00")
    assert len(header._header_versions) <= header._HEADER_VERSIONS_KEPT


def test_the_prefix_reader_is_one_struct_unpack() -> None:
    """Dispatch's routing calls it per request: it must cost what ``Struct.unpack_from`` costs, so
    it is that bound method itself, no Python function around it."""
    assert type(unpack_request_prefix).__name__ == "builtin_function_or_method"
    owner = unpack_request_prefix.__self__  # type: ignore[attr-defined]
    assert isinstance(owner, struct.Struct) and owner.format == ">hhi" and owner.size == REQUEST_PREFIX_SIZE
    frame = encode_request(ApiKey.FETCH, 12, 99, "d", {})
    assert unpack_request_prefix(frame, 0) == (ApiKey.FETCH, 12, 99)
