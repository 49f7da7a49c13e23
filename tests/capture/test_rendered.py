"""Rows decoded with RowDecoder (bodies straight to JSON) equal rows built from Bodies.

The reference is the same row code fed by kafkapy.protocol's Body decoders, whose bodies
``to_json`` writes: every column must match, the reasons of undecodable frames included.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkapy.protocol
from kafkapy.capture.pairing import read_exchanges
from kafkapy.capture.rows import RowDecoder, decode_capture_values
from kafkapy.protocol import RenderedBody
from kafkapy.protocol.header import peek_request_header

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap"))


def _both(source: Any, **options: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    def fresh() -> Any:
        return io.BytesIO(source) if isinstance(source, bytes) else source

    new = list(decode_capture_values(fresh(), **options))
    old = list(decode_capture_values(fresh(), decoder=kafkapy.protocol, **options))
    return new, old


@pytest.mark.parametrize("decode_records", [True, False])
@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_captures_give_the_same_rows(path: Path, decode_records: bool) -> None:
    new, old = _both(path, decode_records=decode_records)
    assert new == old
    assert any(row[9] is not None for row in new)  # bodies were decoded, not only headers


def test_a_synthetic_capture_gives_the_same_rows(tmp_path: Path) -> None:
    """The benchmark's own mix (every API it writes, records included), one small file."""
    from benchmarks.capture import generate

    (path,), _ = generate(tmp_path, 1, files=1)
    new, old = _both(path)
    assert new == old and len(new) > 100


_ORIGINALS = [p.read_bytes() for p in CAPTURE_FILES]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(original=st.sampled_from(_ORIGINALS), data=st.data())
def test_damaged_captures_give_the_same_rows(original: bytes, data: st.DataObject) -> None:
    """Bytes flipped past the capture's headers: frames that no longer decode must give the same
    status and reason (the DecodeError's text) both ways."""
    buf = bytearray(original)
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(min(100, len(buf) - 1), len(buf) - 1))
        buf[at] ^= data.draw(st.integers(1, 255))
    new, old = _both(bytes(buf))
    assert new == old


def test_the_row_decoder_keeps_the_header_fast_path_and_read_exchanges_keeps_bodies() -> None:
    assert RowDecoder().decode_request_header is peek_request_header
    (x,) = read_exchanges(CAPTURES / "18-api-versions-v3.pcap")
    assert x.response is not None and x.response.body["error_code"] == 0
    (y,) = read_exchanges(CAPTURES / "18-api-versions-v3.pcap", decoder=RowDecoder())
    assert y.response is not None and type(y.response.body) is RenderedBody
    assert y.response.body.error_code == 0 and y.response.body.text.startswith('{"error_code":0,')
