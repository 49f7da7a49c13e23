"""Compression bombs against a running broker, over the wire: a Produce batch whose payload would
inflate beyond what any producer builds (zstd and gzip: one record of 272 MiB of zeros in a few
kilobytes, lz4 in 1.2 MB, snappy declaring 4 GiB in ten bytes) is refused for its partition alone, with
INVALID_RECORD, as a batch whose records cannot be read; the other partitions of the same request
are stored, and the broker goes on serving that connection and others (docs/log-append.md).

No client sends such a batch, so the batches are built here: a valid v2 header (one record, a
correct CRC) around the bomb."""

from __future__ import annotations

import itertools
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cramjam
import pytest
from bombs import snappy_claim

from benchmarks.record_walks import zigzag
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.compression import MAX_INFLATED_BYTES, Compression
from kafkapy.protocol.records import Records, build_record_batch, crc32c

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

_topics = itertools.count()
_MIB = 1 << 20
_ZEROS = bytes(_MIB)


def _one_record_of_zeros(size: int) -> tuple[bytes, int, bytes]:
    """A valid v2 record whose value is ``size`` zero bytes, as (bytes before the value, the
    value's size, bytes after it): the payload of a batch the broker would store if it could."""
    body_head = b"\x00" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(size)
    tail = zigzag(0)  # no headers
    return zigzag(len(body_head) + size + len(tail)) + body_head, size, tail


def _streamed(compressor: Any, size: int) -> bytes:
    """The one-record payload of :func:`_one_record_of_zeros` through ``compressor``, a MiB at a
    time (never the inflated bytes in memory)."""
    head, size, tail = _one_record_of_zeros(size)
    parts = [compressor.compress(head)]
    parts += [compressor.compress(_ZEROS) for _ in range(size // _MIB)]
    parts.append(compressor.compress(tail))
    return b"".join(bytes(p) for p in parts if p is not None)


def _zstd_bomb(size: int) -> bytes:
    compressor = cramjam.zstd.Compressor(level=3)
    _streamed(compressor, size)
    return bytes(compressor.finish())


def _gzip_bomb(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    return _streamed(compressor, size) + compressor.flush()


def _lz4_bomb(size: int) -> bytes:
    compressor = cramjam.lz4.Compressor(level=0, content_checksum=False, block_linked=False)
    _streamed(compressor, size)
    return bytes(compressor.finish())


# Each codec's bomb: one valid record of zeros 16 MiB beyond Produce's 256 MiB bound, which the
# broker would store (inflating it whole, up to three times) without the bound; lz4 tops out near
# 256:1, so its bomb takes 1.2 MB and the topic's max.message.bytes is raised for it (which leaves
# the bound at 256 MiB). Snappy's claims 4 GiB in a few bytes. The zstd and gzip ones take a
# second or so to compress.
_OVER = MAX_INFLATED_BYTES + 16 * _MIB
_BOMBS = {
    Compression.ZSTD: lambda: _zstd_bomb(_OVER),
    Compression.GZIP: lambda: _gzip_bomb(_OVER),
    Compression.LZ4: lambda: _lz4_bomb(_OVER),
    Compression.SNAPPY: lambda: snappy_claim((1 << 32) - 1),
}


@pytest.fixture(scope="module")
def bombs() -> dict[Compression, bytes]:
    return {codec: build() for codec, build in _BOMBS.items()}


def bomb_batch(codec: Compression, payload: bytes) -> bytes:
    """A producer's one-record batch in ``codec`` with ``payload`` as its compressed records."""
    header = bytearray(build_record_batch([{"value": b"v", "timestamp": int(time.time() * 1000)}],
                                          compression=codec)[:61])
    batch = header + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)  # batch_length
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as b:
        yield b


def _topic(broker: Broker, partitions: int) -> str:
    topic = f"bombs-{next(_topics)}"
    assert broker.store is not None and broker.runtime is not None
    broker.store.create_topic(topic, {p: (1,) for p in range(partitions)},
                              config={"max.message.bytes": "2000000"})
    while topic not in broker.runtime.cluster.topics:
        time.sleep(0.001)
    return topic


def _produce(conn: KafkaSocket, topic: str, parts: dict[int, bytes]) -> dict[int, dict[str, Any]]:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": d} for p, d in parts.items()]}]}
    [answer] = conn.call(ApiKey.PRODUCE, 9, body).body["responses"]
    return {a["index"]: a for a in answer["partition_responses"]}


def _fetch_values(conn: KafkaSocket, topic: str, partition: int) -> list[bytes | None]:
    fetched = conn.call(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}]}).body
    [answer] = fetched["responses"][0]["partitions"]
    assert answer["error_code"] == ErrorCode.NONE
    records = answer["records"]
    return [] if records is None else [r.value for r in Records(bytes(records)).records()]


@pytest.mark.parametrize("codec", list(_BOMBS), ids=str)
def test_a_bomb_is_refused_for_its_partition_alone(broker: Broker, bombs: dict[Compression, bytes],
                                                   codec: Compression) -> None:
    topic = _topic(broker, 3)
    other_topic = _topic(broker, 1)
    bomb = bomb_batch(codec, bombs[codec])
    assert len(bomb) < 2_000_000
    good = build_record_batch([{"value": b"kept", "timestamp": int(time.time() * 1000)}], compression=codec)

    # Another client, on its own connection, produces and consumes all along.
    stop = threading.Event()
    other: list[int] = []
    failures: list[BaseException] = []

    def other_client() -> None:
        try:
            with KafkaSocket(broker.bootstrap_servers, timeout=30) as conn:
                while not stop.is_set() or not other:
                    value = b"other-%d" % len(other)
                    answer = _produce(conn, other_topic, {0: build_record_batch([{"value": value}])})[0]
                    assert answer["error_code"] == ErrorCode.NONE
                    assert _fetch_values(conn, other_topic, 0)[-1] == value
                    other.append(answer["base_offset"])
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    thread = threading.Thread(target=other_client)
    thread.start()
    try:
        with KafkaSocket(broker.bootstrap_servers, timeout=30) as conn:
            answers = _produce(conn, topic, {0: bomb, 1: good})
            assert answers[0]["error_code"] == ErrorCode.INVALID_RECORD
            assert answers[0]["base_offset"] == -1
            assert (answers[1]["error_code"], answers[1]["base_offset"]) == (ErrorCode.NONE, 0)
            # The same connection goes on: the bomb's partition takes the next batch at offset 0.
            answers = _produce(conn, topic, {0: good, 2: good})
            assert [(a["error_code"], a["base_offset"]) for a in answers.values()] == [
                (ErrorCode.NONE, 0)] * 2
            assert [_fetch_values(conn, topic, p) for p in range(3)] == [[b"kept"]] * 3
    finally:
        stop.set()
        thread.join(60)
    assert not failures
    assert other == list(range(len(other)))
    assert [r.value for r in broker.records(other_topic, 0)] == [b"other-%d" % i for i in range(len(other))]


def test_a_bomb_sent_again_is_refused_again(broker: Broker, bombs: dict[Compression, bytes]) -> None:
    """Produce reads a refused batch more than once (the from-frame path, then the plain path's
    two steps), and the same bytes arrive again on a retry: each answer is the same refusal."""
    topic = _topic(broker, 1)
    bomb = bomb_batch(Compression.ZSTD, bombs[Compression.ZSTD])
    with KafkaSocket(broker.bootstrap_servers, timeout=30) as conn:
        for _ in range(3):
            assert _produce(conn, topic, {0: bomb})[0]["error_code"] == ErrorCode.INVALID_RECORD
    assert broker.records(topic, 0) == []


def test_a_batch_just_under_the_bound_is_accepted(broker: Broker) -> None:
    """The bound refuses only what passes it: a zstd batch of one 16 MiB record of zeros (a ratio
    no bomb needs to beat, a size no bound should refuse) is stored and read back whole."""
    topic = _topic(broker, 1)
    value = bytes(16 * _MIB)
    good = build_record_batch([{"value": value}], compression="zstd")
    assert len(good) < 4096  # far denser than the ratio gate lets through without a bound
    with KafkaSocket(broker.bootstrap_servers, timeout=30) as conn:
        assert _produce(conn, topic, {0: good})[0]["error_code"] == ErrorCode.NONE
    [stored] = broker.records(topic, 0)
    assert stored.value == value
