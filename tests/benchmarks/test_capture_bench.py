"""benchmarks/capture's synthetic traffic changes per exchange what real traffic changes (so a
decoder that kept what it decoded would not be measured on repeats real captures lack), repeats what
real clients repeat at their intervals, and ``--quick`` runs every decoder on the same frames."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import kafkapy.protocol
from kafkapy.capture import Frame, FrameReader

ROOT = Path(__file__).resolve().parents[2]
_NAMES = {0: "Produce", 1: "Fetch", 3: "Metadata", 12: "Heartbeat", 18: "ApiVersions"}


def _exchanges(path: Path) -> list[tuple[str, int, bytes, bytes]]:
    """(API name, connection, request frame, response frame) in capture order."""
    requests: dict[tuple[Any, int | None], Frame] = {}
    out = []
    for event in FrameReader(path):
        if type(event) is not Frame:
            continue
        if event.from_client:
            requests[(event.conn, event.correlation_id)] = event
            continue
        request = requests.pop((event.conn, event.correlation_id))
        assert request.api_key is not None
        out.append((_NAMES[request.api_key], int(event.conn.id), request.body, event.body))
    assert not requests
    return out


def test_the_mix_varies_what_real_traffic_varies_and_repeats_what_real_clients_repeat(tmp_path: Path) -> None:
    from benchmarks.capture import generate

    (path,), frames = generate(tmp_path, 30, files=1)  # about 3.8 s of capture time
    exchanges = _exchanges(path)
    assert 2 * len(exchanges) == frames
    seen: set[tuple[str, bool, bytes]] = set()
    repeats: Counter[tuple[str, bool]] = Counter()  # (API, is a request) -> frames seen before
    for api, _, request, response in exchanges:
        # a frame's bytes but its correlation id (request bytes 4-8, response bytes 0-4)
        for key in ((api, True, request[:4] + request[8:]), (api, False, response[4:])):
            repeats[key[:2]] += key in seen
            seen.add(key)
    apis = Counter(api for api, *_ in exchanges)
    # the frames real traffic changes every time never repeat
    assert repeats[("Fetch", True)] == repeats[("Fetch", False)] == 0, repeats
    assert repeats[("Produce", True)] == repeats[("Produce", False)] == 0, repeats
    assert apis["Fetch"] > 5_000 and apis["Produce"] > 5_000, apis
    # every client opens with ApiVersions and Metadata; producers and consumers each send theirs
    assert apis["ApiVersions"] == apis["Metadata"] == 24
    assert repeats[("ApiVersions", True)] == repeats[("Metadata", True)] == 22
    assert repeats[("ApiVersions", False)] == repeats[("Metadata", False)] == 23
    # each of the twelve consumers heartbeats once in the first 3.8 s, after 3 s; the answers repeat
    assert apis["Heartbeat"] == 12 and repeats[("Heartbeat", False)] == 11
    assert sum(repeats.values()) / frames < 0.005  # a busy real capture: 0.3% (the module's docstring)


def test_fetch_sessions_offsets_and_batches_move_as_a_brokers_do(tmp_path: Path) -> None:
    from benchmarks.capture import generate

    (path,), _ = generate(tmp_path, 4, files=1)
    epochs: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    high_watermarks: dict[int, list[int]] = defaultdict(list)
    landed: dict[int, list[int]] = defaultdict(list)
    for api, conn, request, response in _exchanges(path):
        req = kafkapy.protocol.decode_request(request).body
        if api == "Fetch":
            resp = kafkapy.protocol.decode_response(response, 1, 12).body
            (part,) = req["topics"][0]["partitions"]
            (answer,) = resp["responses"][0]["partitions"]
            epochs[conn].append((req["session_id"], req["session_epoch"], resp["session_id"]))
            high_watermarks[answer["partition_index"]].append(answer["high_watermark"])
            (batch,) = answer["records"].batches()
            assert batch.crc_valid and batch.base_offset == part["fetch_offset"]
            assert answer["log_start_offset"] <= part["fetch_offset"] < answer["high_watermark"]
        elif api == "Produce":
            resp = kafkapy.protocol.decode_response(response, 0, 9).body
            (batch,) = req["topic_data"][0]["partition_data"][0]["records"].batches()
            assert batch.crc_valid and batch.producer_id >= 0
            (answer,) = resp["responses"][0]["partition_responses"]
            landed[answer["index"]].append(answer["base_offset"])
    assert len(epochs) == 12
    for sessions in epochs.values():
        session = sessions[0][2]
        # the first Fetch opens the session (id 0, epoch 0), the next ones count up in it
        assert sessions == [(session if n else 0, n, session) for n in range(len(sessions))]
    assert len({sessions[0][2] for sessions in epochs.values()}) == 12
    for offsets in [*high_watermarks.values(), *landed.values()]:
        assert offsets == sorted(offsets) and len(set(offsets)) > 1


def test_quick_run_counts_the_same_frames_for_every_decoder() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "capture", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr
    counts = re.search(r"kafkapy rows: ([\d,]+) \(header\), ([\d,]+) \(full\); kafkapy frames: ([\d,]+)",
                       result.stdout)  # fmt: skip
    assert counts, result.stdout
    header, full, frames = (int(c.replace(",", "")) for c in counts.groups())
    assert header == full and frames == 2 * full
    if shutil.which("tshark"):
        assert f"tshark -T fields lines: {frames:,}" in result.stdout
    for row in ("kafkapy decode --bodies none", "kafkapy decode ", "kafkapy framing only"):
        assert row in result.stdout
