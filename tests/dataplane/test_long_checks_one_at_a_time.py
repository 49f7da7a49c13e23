"""Long checks of Produce batches (inflated in steps, walked in slices) run one at a time on a
broker: four connections each sending a few KB of zstd that inflates to 200 MB cost the broker
process about one inflated batch of memory, not four (kafkapy.dataplane.produce, ``_long_checks``;
docs/log-append.md). Measured as the ``kafkapy serve`` process's peak RSS (VmHWM)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.record_walks import zstd_zeros_batch
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on \w+://([^\s:]+):(\d+)")
INFLATED = 200_000_000
SENDERS = 4


@pytest.fixture
def served() -> Iterator[tuple[int, str]]:
    """A ``kafkapy serve`` process: its pid and bootstrap address."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy.cli", "serve", "--override",
                             "listeners=PLAINTEXT://127.0.0.1:0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            match = LISTENING.search(line)
            if match:
                break
        else:
            pytest.fail(f"kafkapy serve exited ({proc.wait()}) before listening")
        yield proc.pid, f"{match.group(1)}:{match.group(2)}"
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def _peak_rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def _produce(partition: int, batch: bytes) -> dict[str, Any]:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 60_000, "topic_data": [
        {"name": "bombs", "partition_data": [{"index": partition, "records": batch}]}]}


def test_four_connections_inflating_200_mb_each_cost_about_one_inflation(served: tuple[int, str]) -> None:
    """All four batches are stored; the peak grows by less than two inflations (214 MB seen; 816-825
    MB when the four were checked at once)."""
    pid, bootstrap = served
    with SimpleClient(bootstrap) as client:
        created = client.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": "bombs", "num_partitions": SENDERS, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 10_000, "validate_only": False})
        assert created["topics"][0]["error_code"] == ErrorCode.NONE
    batch = zstd_zeros_batch(INFLATED)
    assert len(batch) < 25_000
    sockets = [KafkaSocket(bootstrap, timeout=120) for _ in range(SENDERS)]
    try:
        for conn in sockets:
            conn.call(ApiKey.API_VERSIONS, 0)
        before = _peak_rss_bytes(pid)
        for partition, conn in enumerate(sockets):
            conn.send(ApiKey.PRODUCE, 9, _produce(partition, batch))
        for conn in sockets:
            [answer] = conn.read_response(ApiKey.PRODUCE, 9).body["responses"][0]["partition_responses"]
            assert answer["error_code"] == ErrorCode.NONE, answer
    finally:
        for conn in sockets:
            conn.close()
    grown = _peak_rss_bytes(pid) - before
    assert grown < 2 * INFLATED, (
        f"peak RSS grew {grown / 1e6:.0f} MB for {SENDERS} batches of {INFLATED / 1e6:.0f} MB")
