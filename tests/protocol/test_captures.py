"""Every Kafka frame of every real capture decodes with kafkapy.protocol.

The captures (tests/data/captures, see its README) were taken between real
clients and brokers, so they are ground truth: a request or response frame
that fails to decode is a protocol-layer bug unless the capture itself cut
the frame short (reported as truncated by kafkapy.capture.frames).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.capture import CaptureError, Frame, FrameReader
from kafkapy.capture.pairing import Pairer, pair_frames, read_exchanges
from kafkapy.errors import DecodeError
from kafkapy.protocol import decode_request, decode_request_header, decode_response

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap"))

# (api_key, api_version) of each exchange, in the order responses arrive.
EXPECTED = {
    "00-produce-v2.pcap": [(0, 2)],
    "00-produce-v7-sw8.pcap": [(0, 7)],
    "00-produce-v9.pcap": [(0, 9)],
    "01-fetch-v12-ok.pcap": [(1, 12)],
    "01-fetch-v12-perf.pcap": [(1, 12)],
    "01-fetch-v12-unknown.pcap": [(1, 12)],
    "11-join-group-v7.pcap": [(11, 7)],
    "13-leave-group-v4.pcap": [(13, 4)],
    "14-sync-group-v5.pcap": [(14, 5)],
    "18-api-versions-v3.pcap": [(18, 3)],
    "mixed-with-unsupported.pcap": [(8, 8), (12, 4), (1, 13)],  # OffsetCommit, Heartbeat, Fetch
}


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_every_request_frame_decodes(path: Path) -> None:
    frames = [e for e in FrameReader(path) if isinstance(e, Frame) and e.from_client]
    assert frames
    for frame in frames:
        header = decode_request_header(frame.body)
        assert (header.api_key, header.correlation_id) == (frame.api_key, frame.correlation_id)
        if frame.truncated:
            continue
        request = decode_request(frame.body)
        assert (request.api_key, request.api_version) == (frame.api_key, frame.api_version)
        assert request.trailing_bytes == 0


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_every_response_decodes_with_its_requests_key_and_version(path: Path) -> None:
    exchanges = list(read_exchanges(path))
    assert [(x.api_key, x.api_version) for x in exchanges] == EXPECTED[path.name]
    for x in exchanges:
        truncated = any(f is not None and f.truncated for f in (x.request_frame, x.response_frame))
        if truncated:
            assert x.status in ("truncated", "ok", "empty_response")
            continue
        assert x.status in ("ok", "empty_response"), (x.status, x.request_error, x.response_error)
        assert x.paired_by == "correlation-id"
        if x.status == "ok":
            assert x.response is not None and x.response.correlation_id == x.correlation_id


def test_api_versions_response_with_tagged_fields() -> None:
    (x,) = read_exchanges(CAPTURES / "18-api-versions-v3.pcap")
    assert x.status == "ok" and x.response is not None
    assert x.response.body["error_code"] == 0
    assert len(x.response.body["api_keys"]) > 40


_ORIGINALS = [p.read_bytes() for p in CAPTURE_FILES]


@st.composite
def mutated_captures(draw: st.DrawFn) -> bytes:
    """A real capture with bytes flipped: mostly inside the Kafka payload,
    since the packet headers come first in each record."""
    data = bytearray(draw(st.sampled_from(_ORIGINALS)))
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(24, len(data) - 1))
        data[pos] = draw(st.integers(0, 255))
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_captures())
def test_fuzz_mutated_captures_decode_or_report(data: bytes) -> None:
    """Garbage in gives an Exchange with a status (DecodeError inside), or a
    CaptureError for the file itself, and nothing else."""
    try:
        for x in pair_frames(FrameReader(io.BytesIO(data), kafka_ports={9092, 36333}), Pairer()):
            assert x.status in (
                "ok",
                "empty_response",
                "no_response",
                "orphan_response",
                "truncated",
                "error",
            )
    except CaptureError:
        pass


def test_frame_cut_short_by_the_capture_is_reported_truncated() -> None:
    """Cut the last packet (the Fetch response) of a real capture in half."""
    data = (CAPTURES / "01-fetch-v12-ok.pcap").read_bytes()
    cut = data[:-10]  # the response packet holds 21 payload bytes; keep 11 of them
    (x,) = read_exchanges(io.BytesIO(cut))
    assert x.status == "truncated" and x.response_frame is not None and x.response_frame.truncated
    assert x.response_frame.missing > 0
    with pytest.raises(DecodeError) as info:
        decode_response(x.response_frame.body, 1, 12)
    assert info.value.truncated and info.value.api_key == 1 and info.value.api_version == 12
