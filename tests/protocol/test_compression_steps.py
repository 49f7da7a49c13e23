"""Inflation in steps (kafkapy/protocol/compression.py, ``decompress_steps``) against inflation in
one go (``decompress``): for every codec, every framing a producer writes, and payloads cut short,
damaged or followed by more bytes, the same bytes or the same error (the same kind of DecodeError;
the limit's error word for word), whatever the step and the limit (a damaged payload past the
limit may be called corrupt by one and too large by the other); and a bomb's steps each inflate
a bounded amount (docs/log-append.md, "Inflation is sliced")."""

from __future__ import annotations

import itertools
from typing import Any

import cramjam
import lz4.frame
import pytest
import zstandard
from bombs import zeros_in
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.errors import DecodeError
from kafkapy.protocol import compression
from kafkapy.protocol.compression import (
    MAX_INFLATED_BYTES,
    Compression,
    Deflater,
    InflationLimitExceeded,
    compress,
    decompress,
    decompress_steps,
)
from kafkapy.protocol.steps import all_at_once

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
CONTRACT = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_MIB = 1 << 20
_SKIPPABLE = b"\x50\x2a\x4d\x18\x03\x00\x00\x00abc"  # a skippable frame, in zstd and in lz4


def _framings(codec: Compression, raw: bytes) -> list[bytes]:
    """``raw`` as producers write it in ``codec``: kafkapy's own framing, and the others readers
    meet (several gzip members, raw snappy, linked lz4 blocks and Kafka 0.8's header checksum,
    several zstd frames and skippable ones)."""
    own = compress(codec, raw)
    if codec == Compression.GZIP:
        half = len(raw) // 2
        return [own, own + compress(codec, raw[:half]), bytes(cramjam.gzip.compress(raw, level=1))]
    if codec == Compression.SNAPPY:
        return [own, bytes(cramjam.snappy.compress_raw(raw)), own + own]
    if codec == Compression.LZ4:
        return [own, lz4.frame.compress(raw, block_size=lz4.frame.BLOCKSIZE_MAX64KB),
                compression.lz4_with_kafka08_header_checksum(own), _SKIPPABLE + own + own]
    return [own, zstandard.ZstdCompressor(write_content_size=False).compress(raw),
            own + _SKIPPABLE + own, _SKIPPABLE]


def _damaged(payload: bytes, how: str, at: int, byte: int) -> bytes:
    where = at % (len(payload) + 1)
    if how == "cut":
        return payload[:where]
    if how == "flip" and payload:
        where = min(where, len(payload) - 1)
        return payload[:where] + bytes((payload[where] ^ (byte or 1),)) + payload[where + 1:]
    if how == "tail":
        return payload + bytes((byte,)) * (1 + at % 5)
    return payload


def _outcome(call: Any) -> tuple[str, Any]:
    """``("bytes", b)``, ``("limit", message)`` or ``("corrupt", None)``, with the memory of the last
    refused payload cleared first (it would answer the second call from the first's verdict)."""
    compression._last_refused = None
    try:
        return "bytes", bytes(call())
    except InflationLimitExceeded as exc:
        return "limit", str(exc)
    except DecodeError:
        return "corrupt", None


@given(codec=st.sampled_from(CODECS), raw=st.binary(max_size=3000) | st.builds(bytes, st.integers(0, 40_000)),
       framing=st.integers(0, 3), how=st.sampled_from(["whole", "cut", "flip", "tail"]),
       at=st.integers(0, 1 << 16), byte=st.integers(0, 255), every=st.integers(1, 5000),
       limit=st.sampled_from([0, 1, 100, 4096, 39_999, 40_000, MAX_INFLATED_BYTES]))
@CONTRACT
def test_inflation_in_steps_gives_what_inflation_in_one_go_gives(
        codec: Compression, raw: bytes, framing: int, how: str, at: int, byte: int, every: int,
        limit: int) -> None:
    framings = _framings(codec, raw)
    payload = _damaged(framings[framing % len(framings)], how, at, byte)
    whole = _outcome(lambda: decompress(codec, payload, offset=61, limit=limit))
    stepped = _outcome(lambda: all_at_once(
        decompress_steps(codec, payload, offset=61, limit=limit, every=every))[0])
    if stepped != whole:
        # The one difference allowed: a damaged payload past the limit may be called too large by
        # one and corrupt by the other (each codec's library reads its damage and fills its
        # buffer in its own order); both refuse it, and Produce answers both INVALID_RECORD.
        assert {stepped[0], whole[0]} == {"limit", "corrupt"}
        assert _outcome(lambda: decompress(codec, payload, limit=1 << 40))[0] == "corrupt"


@given(codec=st.sampled_from(CODECS), payload=st.binary(max_size=200), every=st.integers(1, 64))
@CONTRACT
def test_garbage_gives_the_same_verdict_in_steps(codec: Compression, payload: bytes, every: int) -> None:
    whole = _outcome(lambda: decompress(codec, payload, limit=4096))
    stepped = _outcome(lambda: all_at_once(decompress_steps(codec, payload, limit=4096, every=every))[0])
    assert stepped == whole


def _pieces(codec: Compression, payload: bytes, every: int) -> list[bytes]:
    """The pieces a codec's stepped reader inflates, one per call into C."""
    view = memoryview(payload)
    if codec == Compression.GZIP:
        return list(compression._gzip_pieces(view, every, MAX_INFLATED_BYTES))
    if codec == Compression.SNAPPY:
        return list(compression._snappy_pieces(view, MAX_INFLATED_BYTES))
    if codec == Compression.LZ4:
        return list(compression._lz4_pieces(view, every, MAX_INFLATED_BYTES))
    return list(compression._zstd_pieces(view, every))


@pytest.mark.parametrize("codec", CODECS, ids=str)
def test_a_bomb_is_inflated_a_bounded_amount_at_a_time(codec: Compression) -> None:
    """64 MiB of zeros in steps of 1 MiB: the bytes of the one-go call, a yield after each MiB or
    so, and no call into C inflating more than a step (a zstd feed may add one block, 128 KiB;
    snappy's blocks are its 32 KiB chunks)."""
    bomb = zeros_in(codec, 64 * _MIB)
    inflated, yields = all_at_once(decompress_steps(codec, bomb, limit=64 * _MIB, every=_MIB))
    assert inflated == decompress(codec, bomb, limit=64 * _MIB)
    assert 63 <= yields <= 64
    pieces = _pieces(codec, bomb, _MIB)
    assert max(len(piece) for piece in pieces) <= _MIB + 128 * 1024
    assert sum(len(piece) for piece in pieces) == 64 * _MIB


@pytest.mark.parametrize("codec", CODECS, ids=str)
def test_a_bomb_past_the_limit_is_refused_in_steps_with_the_limits_error(codec: Compression) -> None:
    compression._last_refused = None
    with pytest.raises(InflationLimitExceeded) as refused:
        all_at_once(decompress_steps(codec, zeros_in(codec, 16 * _MIB), offset=61, limit=8 * _MIB,
                                     every=_MIB))
    assert str(refused.value) == (f"{codec} payload inflates beyond the limit of {8 * _MIB} bytes "
                                  "[field records, byte offset 61]")


@pytest.mark.parametrize("codec", CODECS, ids=str)
def test_a_payload_too_small_to_pass_a_step_is_inflated_in_one_go(codec: Compression) -> None:
    """The usual batch costs no more than before: a payload that cannot inflate beyond one step at
    its codec's densest ratio takes decompress itself, and never yields."""
    payload = compress(codec, b"x" * 100)
    every = 4 * _MIB if codec != Compression.ZSTD else len(payload) * 32768
    inflated, yields = all_at_once(decompress_steps(codec, payload, every=every))
    assert (bytes(inflated), yields) == (b"x" * 100, 0)


@given(codec=st.sampled_from(list(Compression)),
       raw=st.binary(max_size=3000) | st.builds(bytes, st.integers(0, 70_000)),
       cuts=st.lists(st.integers(0, 70_000), max_size=6), level=st.sampled_from([None, 1, 3, 9]))
@CONTRACT
def test_compression_in_pieces_gives_what_compression_in_one_go_gives(
        codec: Compression, raw: bytes, cuts: list[int], level: int | None) -> None:
    """Deflater, fed a payload in pieces cut anywhere (a rebuilt batch's records, a long value in
    slices), against compress of the whole: the same bytes, for every codec and level."""
    bounds = sorted({0, len(raw), *(cut % (len(raw) + 1) for cut in cuts)})
    deflater = Deflater(codec, level)
    pieces = [deflater.compress(raw[a:b]) for a, b in itertools.pairwise(bounds)]
    assert b"".join(pieces) + deflater.finish() == compress(codec, raw, level)
