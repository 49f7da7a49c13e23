"""Record walks: what one Produce batch of many tiny records costs to check, and how long it holds
the broker's event loop.

A record batch states its record count, and the append checks walk every record (Kafka's
LogValidator does too). A compressed batch can carry a great many: 1,000,000 records of 7 bytes
repeat so well that zstd writes them in about 670 bytes. This benchmark times
``validate_records`` on such batches, per record (process CPU time, the best of a few runs, each
batch being checked whole), and then sends each to a running broker over a socket while another
connection asks ApiVersions over and over: the loop's largest gap (a callback asked every
millisecond; ``LoopGaps``), the longest ApiVersions round trip, and when the batch's own answer
came. The batches:

* uncompressed, ~1 MB (``max.message.bytes``' default) of 7-byte records, the keys alternately
  null and one byte so that the uniform-records fast path declines: the record-by-record walk;
* the same, every offset delta 0: every record but the first is named in a record error;
* zstd, 1,000,000 such valid records (about 1.3 MB compressed; the topic takes 2 MB);
* zstd, 1,000,000 identical records with offset delta 0 (about 670 bytes): refused with
  INVALID_RECORD and 999,999 record errors, a 50 MB answer;
* zstd, one record whose value is 200 MB of zeros (about 6 KB): valid, and stored; its walk is
  one record, its inflation 200 MB;
* the same to a topic whose ``compression.type`` is lz4: rebuilt in lz4 (840 KB) before it is stored.

The "check" column is ``validate_records`` alone: the rebuild is not in it.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

import cramjam

from benchmarks import LoopGaps, Options, Report, machine_note, render_table, revision
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.log.append import RecordsRejected, validate_records
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.compression import Compression, compress
from kafkapy.protocol.records import V2_HEADER_SIZE, build_record_batch, crc32c

TITLE = "Record walks: batches of many tiny records"

NOW = 1_767_225_600_000
TOPIC_BYTES = 2_000_000  # max.message.bytes of the benchmark's topic: the valid zstd batch is 1.3 MB
_SIZE = struct.Struct(">i")
_MIB = 1 << 20


def zigzag(value: int) -> bytes:
    """A zigzag varint, as v2 records write their lengths and deltas."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tiny_records(count: int, *, in_order: bool) -> bytes:
    """``count`` records of 6-8 bytes (no value, no headers, timestamp delta 0), keys alternately
    null and one byte; offset deltas 0..count-1, or all 0."""
    out = bytearray()
    for i in range(count):
        key = zigzag(-1) if i % 2 else zigzag(1) + b"k"
        body = b"\x00" + zigzag(0) + zigzag(i if in_order else 0) + key + zigzag(-1) + zigzag(0)
        out += zigzag(len(body)) + body
    return bytes(out)


def bomb_records(count: int) -> bytes:
    """``count`` identical 7-byte records, offset delta 0: the payload that compresses best."""
    return (zigzag(6) + b"\x00" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(-1) + zigzag(0)) * count


def batch_of(payload: bytes, count: int, codec: Compression) -> bytes:
    """A producer's batch header (CreateTime ``NOW``, no producer id) around ``payload``, which
    holds ``count`` records, compressed with ``codec``."""
    return _batch_around(compress(codec, payload) if codec else payload, count, codec)


def _batch_around(payload: bytes, count: int, codec: Compression) -> bytes:
    """The batch header of :func:`batch_of` around ``payload``, compressed already."""
    header = bytearray(build_record_batch([{"value": b"v", "timestamp": NOW}])[:V2_HEADER_SIZE])
    struct.pack_into(">h", header, 21, int(codec))
    struct.pack_into(">i", header, 23, count - 1)  # last offset delta
    struct.pack_into(">i", header, 57, count)
    batch = header + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def zstd_zeros_batch(size: int) -> bytes:
    """A valid batch of one record whose value is ``size`` zero bytes, in zstd: a few KB that
    inflate to ``size`` bytes (``max.message.bytes`` counts the compressed ones, so Kafka stores
    it). Compressed a MiB at a time, never whole in memory."""
    body = b"\x00" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(size)
    tail = zigzag(0)  # no headers
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(zigzag(len(body) + size + len(tail)) + body)
    zeros = bytes(_MIB)
    for _ in range(size // _MIB):
        compressor.compress(zeros)
    compressor.compress(bytes(size % _MIB) + tail)
    return _batch_around(bytes(compressor.finish()), 1, Compression.ZSTD)


TOPICS = {"walks": {}, "walks-lz4": {"compression.type": "lz4"}}  # the benchmark's topics, by config


def cases() -> list[tuple[str, bytes, int, str]]:
    """(label, batch, records, topic) of each case."""
    small = 140_000  # 7-8 bytes each: just under 1 MB uncompressed
    big = 1_000_000
    zeros = zstd_zeros_batch(200_000_000)
    return [
        ("none, ~1 MB, valid", batch_of(tiny_records(small, in_order=True), small, Compression.NONE), small,
         "walks"),
        ("none, ~1 MB, every record faulty",
         batch_of(tiny_records(small, in_order=False), small, Compression.NONE), small, "walks"),
        ("zstd, 1M valid", batch_of(tiny_records(big, in_order=True), big, Compression.ZSTD), big, "walks"),
        ("zstd, 1M faulty (the bomb)", batch_of(bomb_records(big), big, Compression.ZSTD), big, "walks"),
        ("zstd, 1 record of 200 MB of zeros", zeros, 1, "walks"),
        ("the same, to an lz4 topic (rebuilt)", zeros, 1, "walks-lz4"),
    ]


def _verdict(raw: bytes, config: LogConfig) -> str:
    try:
        validate_records(bytearray(raw), config, NOW)
    except RecordsRejected as exc:
        return f"{exc.code.name}, {exc.record_error_count:,} record errors"
    return "accepted"


def _best_cpu(fn: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def _frame(api_key: ApiKey, version: int, correlation_id: int, body: dict[str, object]) -> bytes:
    data = encode_request(api_key, version, correlation_id, "bench", body)
    return _SIZE.pack(len(data)) + data


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        parts = bytearray()
        while len(parts) < n:
            chunk = sock.recv(min(n - len(parts), 1 << 20))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            parts += chunk
        return bytes(parts)

    return exactly(_SIZE.unpack(exactly(4))[0])


def _on_the_wire(broker: Broker, topic: str, raw: bytes) -> tuple[float, float, float, int]:
    """(the bomb's answer after s, the longest ApiVersions round trip meanwhile, the loop's largest
    gap, how many ApiVersions were answered meanwhile) for one Produce of ``raw``."""
    assert broker._loop is not None
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    produce = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": raw}]}]}
    with socket.create_connection((host, int(port)), timeout=120) as bomber, \
            socket.create_connection((host, int(port)), timeout=120) as other:
        other.sendall(_frame(ApiKey.API_VERSIONS, 0, 1, {}))
        _read_frame(other)  # connected and served once, outside the clock
        gaps = LoopGaps(broker._loop)
        gaps.start()
        time.sleep(0.01)
        started = time.perf_counter()
        bomber.sendall(_frame(ApiKey.PRODUCE, 9, 1, produce))
        bomber.setblocking(False)
        longest, answered = 0.0, 0
        while True:
            try:
                if bomber.recv(1, socket.MSG_PEEK):
                    break
            except BlockingIOError:
                pass
            asked = time.perf_counter()
            other.sendall(_frame(ApiKey.API_VERSIONS, 0, 2 + answered, {}))
            _read_frame(other)
            longest = max(longest, time.perf_counter() - asked)
            answered += 1
        took = time.perf_counter() - started
        time.sleep(0.02)  # the tick after the longest hold records it
        largest_gap = gaps.stop()
        bomber.setblocking(True)
        answer = decode_response(_read_frame(bomber), ApiKey.PRODUCE, 9).body
        code = answer["responses"][0]["partition_responses"][0]["error_code"]
        assert code in (ErrorCode.NONE, ErrorCode.INVALID_RECORD), code
    return took, longest, largest_gap, answered


def run(options: Options) -> Report:
    runs = 1 if options.quick else 3
    config = LogConfig(max_message_bytes=TOPIC_BYTES)
    built = cases() if not options.quick else cases()[:2]
    headers = ["batch", "bytes", "records", "verdict", "check ms", "µs/record", "answer after s",
               "longest ApiVersions ms", "largest loop gap ms", "ApiVersions meanwhile"]
    rows = []
    with Broker({"broker.id": 1}) as broker:
        assert broker.store is not None and broker.runtime is not None
        for topic, topic_config in TOPICS.items():
            broker.store.create_topic(topic, {0: (1,)},
                                      config={"max.message.bytes": str(TOPIC_BYTES), **topic_config})
        while not all(topic in broker.runtime.cluster.topics for topic in TOPICS):
            time.sleep(0.01)
        for label, raw, count, topic in built:
            cpu = _best_cpu(lambda raw=raw: _verdict(raw, config), runs)
            took, longest, gap, answered = _on_the_wire(broker, topic, raw)
            rows.append([label, f"{len(raw):,}", f"{count:,}", _verdict(raw, config), f"{cpu * 1e3:,.0f}",
                         f"{cpu * 1e6 / count:.2f}", f"{took:.2f}", f"{longest * 1e3:,.0f}",
                         f"{gap * 1e3:,.0f}", f"{answered:,}"])
    note = (f"check: validate_records alone, process CPU time, best of {runs}; the rest over a socket to "
            f"an in-process broker, wall time; {machine_note()}; kafkapy {revision()}.")
    return Report(text=render_table(headers, rows) + "\n" + note,
                  markdown=render_table(headers, rows, markdown=True) + "\n\n" + note)
