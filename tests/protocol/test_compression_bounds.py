"""Bounded inflation (kafkapy/protocol/compression.py): every payload inflates to at most its
caller's limit, a bomb stops there with InflationLimitExceeded, and below the limit the bounded
path gives exactly what the plain one-shot inflation gives."""

from __future__ import annotations

import pytest
from bombs import zeros_in
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import DecodeError
from kafkapy.protocol import compression
from kafkapy.protocol.compression import (
    MAX_INFLATED_BYTES,
    Compression,
    InflationLimitExceeded,
    compress,
    decompress,
)
from kafkapy.protocol.records import RecordBatch, build_record_batch

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
_MIB = 1 << 20


def _unbounded(codec: Compression, data: bytes) -> bytes:
    """What inflation gave before it was bounded: the codec's one-shot call (snappy and lz4 with
    the module's framing, which the bound does not change), with the limit out of reach."""
    return decompress(codec, data, limit=1 << 62) if codec in (Compression.SNAPPY,) else \
        bytes(compression._MODULES[codec].decompress(data))


@pytest.mark.parametrize("codec", CODECS, ids=str)
def test_a_bomb_stops_at_the_limit_with_a_clear_error(codec: Compression) -> None:
    bomb = zeros_in(codec, 64 * _MIB)
    with pytest.raises(InflationLimitExceeded) as refused:
        decompress(codec, bomb, offset=61, limit=_MIB)
    assert str(refused.value) == (f"{codec} payload inflates beyond the limit of {_MIB} bytes "
                                  "[field records, byte offset 61]")
    assert refused.value.limit == _MIB
    assert isinstance(refused.value, DecodeError)  # every reader already handles it
    assert len(decompress(codec, bomb, limit=64 * _MIB)) == 64 * _MIB  # exactly at the limit: fine


def test_a_zstd_bomb_far_beyond_the_default_limit_stops_at_it() -> None:
    """1 GiB claimed by 32 KB of zstd: inflation stops after the default 256 MiB."""
    bomb = zeros_in(Compression.ZSTD, 4 * MAX_INFLATED_BYTES)
    assert len(bomb) < 40_000
    with pytest.raises(InflationLimitExceeded, match=f"beyond the limit of {MAX_INFLATED_BYTES} bytes"):
        decompress(Compression.ZSTD, bomb)


@pytest.mark.parametrize("declared", [MAX_INFLATED_BYTES + 1, (1 << 32) - 1])
def test_a_snappy_length_claim_is_refused_before_anything_is_allocated(declared: int) -> None:
    """A raw snappy block states its length first; cramjam would allocate it whole (4 GiB from
    ten bytes) before finding the data short. The claim is checked against the limit first."""
    head = bytearray()
    value = declared
    while value >= 0x80:
        head.append(value & 0x7F | 0x80)
        value >>= 7
    head.append(value)
    raw = bytes(head) + b"\x00x"
    xerial = compression._XERIAL_HEADER + len(raw).to_bytes(4, "big") + raw
    for payload in (raw, xerial):
        with pytest.raises(InflationLimitExceeded):
            decompress(Compression.SNAPPY, payload)


def test_xerial_chunks_count_against_one_limit() -> None:
    payload = compress(Compression.SNAPPY, bytes(100_000))  # four 32 KiB chunks
    assert decompress(Compression.SNAPPY, payload, limit=100_000) == bytes(100_000)
    with pytest.raises(InflationLimitExceeded):
        decompress(Compression.SNAPPY, payload, limit=99_999)


def test_a_refused_payload_is_refused_again_without_inflating(monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = zeros_in(Compression.ZSTD, 16 * _MIB)
    with pytest.raises(InflationLimitExceeded):
        decompress(Compression.ZSTD, bomb, limit=_MIB)

    def no_inflation(*args: object) -> bytes:
        raise AssertionError("inflated again")

    monkeypatch.setattr(compression, "_inflate", no_inflation)
    for limit in (_MIB, _MIB // 2):
        with pytest.raises(InflationLimitExceeded, match=f"limit of {limit} bytes"):
            decompress(Compression.ZSTD, memoryview(bomb), limit=limit)
    # A higher limit, or other bytes, are inflated: the remembered refusal says nothing of them.
    with pytest.raises(DecodeError, match="inflated again"):  # decompress words what it raised
        decompress(Compression.ZSTD, bomb, limit=2 * _MIB)
    with pytest.raises(DecodeError, match="inflated again"):
        decompress(Compression.ZSTD, bomb[:-1] + bytes([bomb[-1] ^ 1]), limit=_MIB)


def test_record_batches_pass_their_limit_on() -> None:
    batch = RecordBatch(build_record_batch([{"value": bytes(2 * _MIB)}], compression="zstd"))
    assert batch.record_list()[0].value == bytes(2 * _MIB)
    assert batch.scan(inflate_limit=3 * _MIB).records == 1
    for read in (lambda: batch.record_list(inflate_limit=_MIB), lambda: batch.scan(inflate_limit=_MIB)):
        with pytest.raises(InflationLimitExceeded) as refused:
            read()
        assert refused.value.offset == 61  # where the payload starts in the records bytes


# Payloads from compressible to random, so both the one-shot path (short payloads) and the
# bounded one (a limit a payload's size times its codec's densest ratio can pass) are taken.
_payloads = st.one_of(
    st.binary(max_size=4096),
    st.builds(lambda unit, n: unit * n, st.binary(min_size=1, max_size=64), st.integers(1, 4096)),
    st.builds(lambda a, n, b: a + bytes(n) + b, st.binary(max_size=200), st.integers(0, 1 << 18),
              st.binary(max_size=200)),
)


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(CODECS), plain=_payloads, slack=st.integers(0, 1 << 16))
def test_bounded_equals_unbounded_under_the_limit(codec: Compression, plain: bytes, slack: int) -> None:
    packed = compress(codec, plain)
    expected = _unbounded(codec, packed)
    assert expected == plain
    with pytest.MonkeyPatch.context() as patch:
        for first_buffer in (None, 1):
            if first_buffer is not None:  # so the window (the second buffer) is used too
                patch.setattr(compression, "_FIRST_BUFFER_MIN", first_buffer)
                patch.setattr(compression, "_FIRST_BUFFER_RATIO", 0)
            for limit in (len(plain), len(plain) + slack, MAX_INFLATED_BYTES):
                assert decompress(codec, packed, limit=limit) == expected
            if plain:
                patch.setattr(compression, "_last_refused", None)  # inflated each time, not remembered
                with pytest.raises(InflationLimitExceeded):
                    decompress(codec, packed, limit=len(plain) - 1)


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from([Compression.GZIP, Compression.LZ4, Compression.ZSTD]), plain=_payloads,
       damage=st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), cut=st.integers(0, 64))
def test_damaged_payloads_fail_alike_bounded_or_not(codec: Compression, plain: bytes,
                                                    damage: tuple[int, int], cut: int) -> None:
    """A damaged or cut payload: the bounded path inflates what the one-shot call inflates, and
    refuses (as DecodeError) what it refuses."""
    packed = bytearray(compress(codec, plain))
    at, flip = damage
    packed[at % len(packed)] ^= flip
    data = bytes(packed[: max(1, len(packed) - cut)])
    try:
        expected: bytes | None = bytes(compression._MODULES[codec].decompress(data))
    except BaseException:  # cramjam's errors, and pyo3's panics
        expected = None
    if codec == Compression.LZ4 and expected is None:
        return  # the bounded lz4 path retries with a repaired header checksum (Kafka 0.8's frames)
    limit = max(len(expected) if expected is not None else 0, 1)
    if expected is None:
        with pytest.raises(DecodeError):
            decompress(codec, data, limit=limit)
    else:
        assert decompress(codec, data, limit=limit) == expected
