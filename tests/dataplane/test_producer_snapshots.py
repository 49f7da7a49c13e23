"""Producer-state snapshots across a restart of ``kafkapy serve`` with log.dirs: Kafka's
``<offset>.snapshot`` files are written at segment roll and clean shutdown, and an idempotent
producer's retry after the restart is answered with its original offset, not stored twice."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kafkapy.dataplane.partitions import LogHome, _batches_from
from kafkapy.errors import ErrorCode
from kafkapy.log import LogConfig, LogManager
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket
from test_produce_clients import TIMEOUT_S, _serve

BATCHES = 8
DAY_MS = 24 * 60 * 60 * 1000


def produce(address: str, data: bytes) -> dict[str, Any]:
    """One batch to idem-0, retried while the topic is being (auto-)created after a start."""
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "idem", "partition_data": [{"index": 0, "records": data}]}]}
    deadline = time.monotonic() + TIMEOUT_S
    with KafkaSocket(address) as conn:
        while True:
            conn.call(ApiKey.METADATA, 9, {"topics": [{"name": "idem"}], "allow_auto_topic_creation": True,
                                           "include_cluster_authorized_operations": False,
                                           "include_topic_authorized_operations": False})
            [answer] = conn.call(ApiKey.PRODUCE, 9, body).body["responses"]
            [partition] = answer["partition_responses"]
            if partition["error_code"] not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                               ErrorCode.LEADER_NOT_AVAILABLE):
                return dict(partition)
            assert time.monotonic() < deadline, partition
            time.sleep(0.05)


def stop(proc: subprocess.Popen[str], how: signal.Signals) -> None:
    proc.send_signal(how)
    proc.wait(TIMEOUT_S)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill-9"])
def test_an_idempotent_retry_after_a_restart_gets_its_original_offset(tmp_path: Path,
                                                                     how: signal.Signals) -> None:
    proc, address = _serve(tmp_path, "log.segment.bytes=200")
    try:
        with KafkaSocket(address) as conn:
            init = conn.call(ApiKey.INIT_PRODUCER_ID, 4, {
                "transactional_id": None, "transaction_timeout_ms": 1,
                "producer_id": -1, "producer_epoch": -1,
            }).body
        pid = init["producer_id"]
        batches = [build_record_batch([{"key": b"k", "value": b"value-%d" % i * 8}], producer_id=pid,
                                      producer_epoch=0, base_sequence=i) for i in range(BATCHES)]
        assert [produce(address, b)["base_offset"] for b in batches] == list(range(BATCHES))
        stop(proc, how)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT_S)
    snapshots = sorted(int(p.stem) for p in (tmp_path / "idem-0").glob("*.snapshot"))
    assert snapshots, "no producer snapshot beside the segments"
    segments = sorted(int(p.stem) for p in (tmp_path / "idem-0").glob("*.log"))
    assert len(segments) > 1  # log.segment.bytes=200 rolled, and a roll writes a snapshot
    assert set(segments[1:]) <= set(snapshots)
    if how == signal.SIGTERM:
        assert snapshots[-1] == BATCHES  # a clean shutdown snapshots at the log end
    proc, address = _serve(tmp_path, "log.segment.bytes=200")
    try:
        retry = produce(address, batches[-1])
        assert (retry["error_code"], retry["base_offset"]) == (ErrorCode.NONE, BATCHES - 1)
        after = build_record_batch([{"key": b"k", "value": b"next"}], producer_id=pid, producer_epoch=0,
                                   base_sequence=BATCHES)
        assert produce(address, after)["base_offset"] == BATCHES  # the sequence continues
        stop(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT_S)
    logs = LogManager([tmp_path], broker_id=1)
    try:
        log = logs.get("idem", 0)
        assert log is not None and log.log_end_offset == BATCHES + 1  # the retry was not stored
        # Recovery starts from the clean shutdown's snapshot at the log end: nothing to replay.
        state = LogHome(logs, producer_id_expiration_ms=DAY_MS).producer_state("idem", 0, log)
        assert state.last_snapshot_offset == state.map_end_offset == BATCHES + 1
        assert state.producers[pid].last_seq == BATCHES
    finally:
        logs.close()


def test_the_tail_replayed_after_a_snapshot_is_the_plain_filter_of_the_log(tmp_path: Path) -> None:
    """Contract: recovery's tail (seeking the segment and batch) equals filtering every batch."""
    logs = LogManager([tmp_path], broker_id=1, default_config=LogConfig(segment_bytes=300))
    try:
        log = logs.get_or_create("t", 0)
        for i in range(20):
            values = [{"value": b"v" * 20, "timestamp": 1_700_000_000_000}] * (1 + i % 3)
            log.append(build_record_batch(values, base_offset=log.log_end_offset))
        assert len(log.segments) > 3
        plain = [batch for segment in log.segments for batch in segment.batches()]
        for offset in range(-1, log.log_end_offset + 2):
            expected = [b.base_offset for b in plain if b.last_offset >= offset]
            assert [b.base_offset for b in _batches_from(log, offset)] == expected, offset
    finally:
        logs.close()
