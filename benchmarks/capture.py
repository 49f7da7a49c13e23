"""Capture decoding throughput: kafkapy.capture locally and on Spark, against tshark.

The input is synthetic, written with kafkapy.capture.writer into a temporary
directory: four captures (one per Spark task) of Ethernet/IPv4/TCP at a
1460-byte MSS, each with two dozen client connections of a busy cluster in a
steady state: twelve idempotent producers sending Produce after Produce (one
10-record batch each) and twelve consumers, in two groups, fetching a batch at
a time from a topic of six partitions. Every client opens with ApiVersions and
Metadata, refreshes Metadata every ``metadata.max.age.ms`` (5 min) and each
consumer sends a Heartbeat every ``heartbeat.interval.ms`` (3 s), in capture
time (an exchange every 0.2 ms). The total is 1 GB, as the issue asks
(``KAFKAPY_BENCH_CAPTURE_MB`` changes it; ``--quick`` writes 8 MB).

What varies from exchange to exchange is what varies in real traffic, because
a decoder that keeps what it decoded (a memo of frames seen before, but for
their correlation ids, was tried and removed: docs/capture.md) would otherwise
be measured on repeats that real captures do not have:

* Fetch requests: each consumer's fetch session (KIP-227) has an id of its
  own, and its epoch goes up by one every Fetch (the first opens the session
  with id 0, epoch 0); the fetch offset is the consumer's position.
* Fetch responses: the session id, the partition's high watermark and last
  stable offset (they advance as producers append), its log start offset
  (it moves a segment at a time as retention deletes), and the batch's base
  offset, producer id, sequence and timestamps (the records themselves are the
  same bytes; their decoding costs the same whatever they hold).
* Produce requests: each producer's id, its batches' base sequence and
  timestamps (the CRC recomputed); Produce responses: the base offset each
  batch landed at and the log start offset.
* Heartbeat, Metadata and ApiVersions repeat byte for byte, as real clients
  repeat them (the same member, the same unchanged cluster), at the clients'
  own intervals.

So about 0.2% of the frames repeat an earlier frame byte for byte but for the
correlation id (Heartbeats, Metadata and ApiVersions on the 24 connections).
Real clients in a busy steady state repeat as few: confluent-kafka and
kafka-python producing and consuming 200 messages/s for a minute against
kafkapy's broker, captured by dumpcap, repeated 0.3% of 67,805 frames; at
5 messages/s, 8.9% of 1,577 (Heartbeats and OffsetCommits weigh more there).
The real captures in tests/data/captures hold one to three exchanges each,
none repeated; every Fetch request in them is in a fetch session, at epochs
from 9 to 13,344, and every Produce response has its own base offset. An idle
consumer's empty Fetch answers do repeat (all five Fetch answers there are
empty): a capture of idle clients repeats far more than this mix does.

What each side produces, so the comparison is like for like:

* ``tshark -T fields`` with ``-Y kafka`` prints, per packet holding Kafka
  data, the request key, version, correlation id, client id, the response's
  key (tshark pairs responses with requests) and the error codes of the
  bodies it dissects.
* kafkapy header rows (``kafkapy decode --bodies none``): one row per
  request/response pair with api key, name and version, correlation id,
  client id, endpoints, latency, sizes and status. The same header fields as
  tshark's, paired; no bodies, so no error codes.
* kafkapy full decode (``kafkapy decode``, the default): the same rows plus
  both bodies as JSON with every record decoded, and the top-level error code.
* ``tshark -T json`` is tshark's full dissection written out, the nearest
  peer of the full decode; it runs on the first capture only, to keep the
  benchmark within minutes.

The 1 GB mix uses the versions today's clients send (Produce v9, Fetch v12,
Metadata v12). The tshark here (4.0) dissects none of those three bodies: it
reads their headers and marks the rest "Unsupported ... version". So a
second, smaller capture (:data:`TSHARK_VERSIONS`: Produce v8, Fetch v11,
Metadata v9, the newest it knows) carries the same traffic at versions
tshark dissects in full, records included, and every decoder runs on it too.
That is the like-for-like comparison for the full decode.

Each run is its own process, so peak memory (max RSS) is per run, and the
local runs are interleaved file by file, so the machine's noise hits every
decoder alike. Frames per second counts Kafka frames (requests + responses)
as the generator wrote them; per core divides by the CPU seconds the process
used (for Spark local[2]: the JVM's and its Python workers', read from /proc).
kafkapy's CPU time starts after its imports; tshark's includes its start-up
(about 0.2 s per file). Spark's start-up and JIT warm-up are left out.
"""

from __future__ import annotations

import datetime
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import Options, Report, machine_note, render_table, revision
from kafkapy.protocol.crc32c import crc32c

TITLE = "Capture decoding throughput"

_FILES = 4
_CONNECTIONS = 24


#: API key -> the version the second capture uses: the newest each has that tshark 4.0 dissects.
TSHARK_VERSIONS = {18: 3, 3: 9, 0: 8, 1: 11, 12: 4}

#: Capture time between two exchanges of a file, across its connections.
_EXCHANGE_GAP = 0.0002
#: The clients' timers, in capture seconds (the defaults of Kafka's clients): heartbeat.interval.ms
#: and metadata.max.age.ms.
_HEARTBEAT_INTERVAL = 3.0
_METADATA_MAX_AGE = 300.0
_PARTITIONS = 6
_BATCH_RECORDS = 10
#: The log start offset moves a segment at a time, once the log holds more than it retains.
_SEGMENT = 10_000
_RETAINED = 20_000
_BASE_TIMESTAMP_MS = 1_767_225_600_000

_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")
# A v2 record batch's header fields after its CRC that change from batch to batch: base and max
# timestamp, producer id and epoch, base sequence (offsets 27-57, inside the CRC, which covers 21-).
_BATCH_STAMP = struct.Struct(">qqqhi")


def _field_at(make: Callable[[int], bytes], width: int) -> int:
    """Where the fixed-width integer ``make``'s argument is written in the frame it encodes: the
    first byte that differs between two encodings (so it holds at every version and layout)."""
    a, b = make(1 << (8 * width - 8)), make(2 << (8 * width - 8))
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    assert len(a) == len(b) and diff and diff[-1] - diff[0] < width, diff
    return diff[0]


def _stamp_batch(
    frame: bytearray, at: int, end: int, base_offset: int, timestamp_ms: int, producer_id: int, sequence: int
) -> None:
    """Give the magic-2 batch at ``frame[at:end]`` its own offsets, time and producer, CRC included."""
    _I64.pack_into(frame, at, base_offset)
    _BATCH_STAMP.pack_into(frame, at + 27, timestamp_ms, timestamp_ms, producer_id, 0, sequence)
    struct.pack_into(">I", frame, at + 17, crc32c(frame[at + 21 : end]))


class _Traffic:
    """The exchanges of one capture file: twelve producer and twelve consumer connections in a
    steady state, each frame made from a template with what moves between exchanges written in."""

    def __init__(self, versions: dict[int, int] | None, seed: int) -> None:
        from kafkapy.protocol import build_record_batch
        from kafkapy.protocol import encode_request as encode_request_newest
        from kafkapy.protocol import encode_response as encode_response_newest
        from kafkapy.protocol.codec import fit_body

        def request(api_key: int, version: int, client: str, body: dict[str, Any]) -> bytes:
            v = versions.get(api_key, version) if versions else version
            return encode_request_newest(api_key, v, 0, client, fit_body(api_key, "request", v, body))

        def response(api_key: int, version: int, body: dict[str, Any]) -> bytes:
            v = versions.get(api_key, version) if versions else version
            return encode_response_newest(api_key, v, 0, fit_body(api_key, "response", v, body))

        rnd = random.Random(7)
        batch = build_record_batch(
            [(f"key-{i}".encode(), rnd.randbytes(100), [("trace", b"abc")]) for i in range(_BATCH_RECORDS)],
            base_timestamp=_BASE_TIMESTAMP_MS,
        )  # fmt: skip
        partitions = [{"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                       "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}
                      for p in range(_PARTITIONS)]  # fmt: skip
        meta_resp = {
            "throttle_time_ms": 0, "cluster_id": "bench", "controller_id": 1,
            "brokers": [{"node_id": 1, "host": "broker-1", "port": 9092, "rack": None}],
            "topics": [{"error_code": 0, "name": "orders", "topic_id": None, "is_internal": False,
                        "partitions": partitions, "topic_authorized_operations": -2147483648}],
        }  # fmt: skip
        self.metadata_response = response(3, 12, meta_resp)
        self.versions_response = response(18, 3, {"error_code": 0, "api_keys": [
            {"api_key": k, "min_version": 0, "max_version": 9} for k in range(20)], "throttle_time_ms": 0,
            "supported_features": [], "finalized_features_epoch": -1, "finalized_features": [],
            "zk_migration_ready": False})  # fmt: skip
        self.heartbeat_response = response(12, 4, {"throttle_time_ms": 0, "error_code": 0})
        self.api_versions: dict[str, bytes] = {}
        self.metadata: dict[str, bytes] = {}
        for client in ("bench-producer", "bench-consumer"):
            self.api_versions[client] = request(18, 3, client, {
                "client_software_name": "bench", "client_software_version": "1"})  # fmt: skip
            self.metadata[client] = request(3, 12, client, {
                "topics": [{"topic_id": None, "name": "orders"}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})  # fmt: skip
        # Two consumer groups of six, each member reading one partition.
        self.heartbeats = [
            request(12, 4, "bench-consumer", {
                "group_id": f"bench-group-{c // _PARTITIONS}", "generation_id": 1,
                "member_id": f"bench-consumer-{c:02d}", "group_instance_id": None})
            for c in range(2 * _PARTITIONS)
        ]  # fmt: skip

        def produce(partition: int = 0) -> bytes:
            return request(0, 9, "bench-producer", {
                "transactional_id": None, "acks": -1, "timeout_ms": 30000,
                "topic_data": [{"name": "orders",
                                "partition_data": [{"index": partition, "records": batch}]}]})  # fmt: skip

        def produce_response(partition: int = 0, base_offset: int = 0, log_start: int = 0) -> bytes:
            return response(0, 9, {"responses": [{"name": "orders", "partition_responses": [{
                "index": partition, "error_code": 0, "base_offset": base_offset, "log_append_time_ms": -1,
                "log_start_offset": log_start, "record_errors": [], "error_message": None}]}],
                "throttle_time_ms": 0})  # fmt: skip

        def fetch(partition: int = 0, session: int = 0, epoch: int = 0, offset: int = 0) -> bytes:
            return request(1, 12, "bench-consumer", {
                "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
                "isolation_level": 0, "session_id": session, "session_epoch": epoch,
                "topics": [{"topic": "orders", "partitions": [{
                    "partition": partition, "current_leader_epoch": 0, "fetch_offset": offset,
                    "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1048576}]}],
                "forgotten_topics_data": [], "rack_id": ""})  # fmt: skip

        def fetch_response(
            partition: int = 0, session: int = 0, high_watermark: int = 0, stable: int = 0, log_start: int = 0
        ) -> bytes:
            return response(1, 12, {
                "throttle_time_ms": 0, "error_code": 0, "session_id": session,
                "responses": [{"topic": "orders", "partitions": [{
                    "partition_index": partition, "error_code": 0, "high_watermark": high_watermark,
                    "last_stable_offset": stable, "log_start_offset": log_start, "aborted_transactions": None,
                    "preferred_read_replica": -1, "records": batch}]}]})  # fmt: skip

        self.produce, self.produce_response = produce(), produce_response()
        self.fetch, self.fetch_response = fetch(), fetch_response()
        self.produce_at = {
            "partition": _field_at(lambda v: produce(partition=v), 4),
            "batch": self.produce.index(batch),
        }
        self.produce_response_at = {
            "partition": _field_at(lambda v: produce_response(partition=v), 4),
            "base_offset": _field_at(lambda v: produce_response(base_offset=v), 8),
            "log_start": _field_at(lambda v: produce_response(log_start=v), 8),
        }
        self.fetch_at = {
            "partition": _field_at(lambda v: fetch(partition=v), 4),
            "session": _field_at(lambda v: fetch(session=v), 4),
            "epoch": _field_at(lambda v: fetch(epoch=v), 4),
            "offset": _field_at(lambda v: fetch(offset=v), 8),
        }
        self.fetch_response_at = {
            "partition": _field_at(lambda v: fetch_response(partition=v), 4),
            "session": _field_at(lambda v: fetch_response(session=v), 4),
            "high_watermark": _field_at(lambda v: fetch_response(high_watermark=v), 8),
            "stable": _field_at(lambda v: fetch_response(stable=v), 8),
            "log_start": _field_at(lambda v: fetch_response(log_start=v), 8),
            "batch": self.fetch_response.index(batch),
        }
        self.batch_size = len(batch)
        # The state the frames tell of: each partition's log, each consumer's fetch session and
        # position, each producer's id and next sequence, each client's timers.
        ids = random.Random(seed)
        self.log_end = [ids.randrange(100_000, 1_000_000) for _ in range(_PARTITIONS)]
        # retention deletes whole segments: the log keeps at least what it retains
        self.log_start = [(end - _RETAINED) // _SEGMENT * _SEGMENT for end in self.log_end]
        self.session_ids = [ids.randrange(1, 1 << 31) for _ in range(2 * _PARTITIONS)]
        self.epochs = [0] * (2 * _PARTITIONS)
        # consumers some way behind the log's end (its two producers write twice what one reads)
        self.positions = [self.log_end[c % _PARTITIONS] - ids.randrange(1, 5000)
                          for c in range(2 * _PARTITIONS)]  # fmt: skip
        self.producer_ids = [ids.randrange(1000, 1 << 40) for _ in range(2 * _PARTITIONS)]
        self.sequences = [0] * (2 * _PARTITIONS)
        self.started: list[int] = [0] * _CONNECTIONS
        self.heartbeat_due = [0.0] * _CONNECTIONS
        self.metadata_due = [0.0] * _CONNECTIONS

    def next_exchange(self, connection: int, ts: float) -> tuple[bytes, bytes]:
        """Connection ``connection``'s next request and its response (correlation ids 0). Even
        connections are producers, odd ones consumers. A client opens with ApiVersions, then Metadata;
        then a producer sends Produce after Produce and a consumer Fetch after Fetch, each refreshing
        Metadata every metadata.max.age.ms and each consumer sending a Heartbeat every
        heartbeat.interval.ms, as Kafka's clients do."""
        client = connection // 2
        consumer = connection % 2 == 1
        name = "bench-consumer" if consumer else "bench-producer"
        if self.started[connection] == 0:
            self.started[connection] = 1
            self.heartbeat_due[connection] = ts + _HEARTBEAT_INTERVAL
            return self.api_versions[name], self.versions_response
        if ts >= self.metadata_due[connection]:
            self.metadata_due[connection] = ts + _METADATA_MAX_AGE
            return self.metadata[name], self.metadata_response
        if consumer and ts >= self.heartbeat_due[connection]:
            self.heartbeat_due[connection] = ts + _HEARTBEAT_INTERVAL
            return self.heartbeats[client], self.heartbeat_response
        return self._fetch(client, ts) if consumer else self._produce(client, ts)

    def _produce(self, producer: int, ts: float) -> tuple[bytes, bytes]:
        """A batch from an idempotent producer (its id, the next sequence, the time it was made) and
        the offset it landed at."""
        partition = producer % _PARTITIONS
        req = bytearray(self.produce)
        at = self.produce_at
        _I32.pack_into(req, at["partition"], partition)
        batch = at["batch"]
        _stamp_batch(req, batch, batch + self.batch_size, 0, int(ts * 1000), self.producer_ids[producer],
                     self.sequences[producer])  # fmt: skip
        self.sequences[producer] += _BATCH_RECORDS
        base_offset = self.log_end[partition]
        self.log_end[partition] += _BATCH_RECORDS
        if self.log_end[partition] - self.log_start[partition] - _SEGMENT >= _RETAINED:
            self.log_start[partition] += _SEGMENT  # the oldest segment is all past retention: deleted
        resp = bytearray(self.produce_response)
        at = self.produce_response_at
        _I32.pack_into(resp, at["partition"], partition)
        _I64.pack_into(resp, at["base_offset"], base_offset)
        _I64.pack_into(resp, at["log_start"], self.log_start[partition])
        return bytes(req), bytes(resp)

    def _fetch(self, consumer: int, ts: float) -> tuple[bytes, bytes]:
        """An incremental fetch (KIP-227): the session's next epoch, the consumer's position; the
        answer carries the batch at that position and the partition's high watermark. The first
        fetch of a connection opens the session (id 0, epoch 0) and learns its id."""
        partition = consumer % _PARTITIONS
        session, epoch = self.session_ids[consumer], self.epochs[consumer]
        self.epochs[consumer] += 1
        position = max(self.positions[consumer], self.log_start[partition])
        self.positions[consumer] = position + _BATCH_RECORDS
        self.log_end[partition] = max(self.log_end[partition], self.positions[consumer])
        req = bytearray(self.fetch)
        at = self.fetch_at
        _I32.pack_into(req, at["partition"], partition)
        _I32.pack_into(req, at["session"], session if epoch else 0)
        _I32.pack_into(req, at["epoch"], epoch)
        _I64.pack_into(req, at["offset"], position)
        resp = bytearray(self.fetch_response)
        at = self.fetch_response_at
        _I32.pack_into(resp, at["partition"], partition)
        _I32.pack_into(resp, at["session"], session)
        _I64.pack_into(resp, at["high_watermark"], self.log_end[partition])
        _I64.pack_into(resp, at["stable"], self.log_end[partition])
        _I64.pack_into(resp, at["log_start"], self.log_start[partition])
        batch = at["batch"]
        _stamp_batch(resp, batch, batch + self.batch_size, position, int(ts * 1000) - 1000,
                     self.producer_ids[partition], position % (1 << 31))  # fmt: skip
        _I32.pack_into(resp, batch + 12, 0)  # the partition leader epoch the broker stamped
        return bytes(req), bytes(resp)


def generate(
    directory: Path, total_mb: int, files: int = _FILES, seed: int = 0, versions: dict[int, int] | None = None
) -> tuple[list[Path], int]:
    """Write ``files`` captures totalling about ``total_mb``; returns them and the Kafka frame count."""
    from kafkapy.capture import PcapWriter, TcpFlow

    paths: list[Path] = []
    frames = 0
    per_file = total_mb * 1_000_000 // files
    for f in range(files):
        path = directory / f"bench-{seed + f}.pcap"
        paths.append(path)
        traffic = _Traffic(versions, seed + f)
        with PcapWriter(path) as w:
            net = f"10.1.{seed + f}"
            flows = [TcpFlow((f"{net}.{c + 1}", 40000 + c), ("10.0.0.1", 9092)) for c in range(_CONNECTIONS)]
            corr = [0] * _CONNECTIONS
            ts = 1_767_225_600.0
            for c, flow in enumerate(flows):
                for t, pkt in flow.handshake(ts + c * 1e-4):
                    w.write(pkt, t)
            size = 0
            i = 0
            while size < per_file:
                c = i % _CONNECTIONS
                ts += _EXCHANGE_GAP
                req, resp = traffic.next_exchange(c, ts)
                corr[c] += 1
                body = bytearray(req)
                _I32.pack_into(body, 4, corr[c])
                for t, pkt in flows[c].send(True, _I32.pack(len(body)) + body, ts):
                    w.write(pkt, t)
                    size += len(pkt) + 16
                rbody = bytearray(resp)
                _I32.pack_into(rbody, 0, corr[c])
                for t, pkt in flows[c].send(False, _I32.pack(len(rbody)) + rbody, ts + _EXCHANGE_GAP / 2):
                    w.write(pkt, t)
                    size += len(pkt) + 16
                frames += 2
                i += 1
            for flow in flows:
                for t, pkt in flow.close(ts + 0.001):
                    w.write(pkt, t)
    return paths, frames


_RUN = """
import sys, time, resource
mode, path = sys.argv[1], sys.argv[2]
from kafkapy.capture import Frame, FrameReader
from kafkapy.capture.rows import decode_capture
import kafkapy.protocol
start = time.perf_counter(); cpu = time.process_time()
if mode == "header":
    n = sum(1 for row in decode_capture(path, bodies=()))
elif mode == "full":
    n = sum(1 for row in decode_capture(path))
else:
    n = sum(1 for event in FrameReader(path) if type(event) is Frame)
wall = time.perf_counter() - start
print(n, wall, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

_SPARK = """
import os, sys, time
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession
from kafkapy.spark import write_captures

def tree():
    # pid -> (CPU seconds, max RSS KiB, is Python) of every process below this one: the JVM
    # and the Python workers it forks. CPU of children that exited is in their parents' cutime.
    tick, procs, kids = os.sysconf("SC_CLK_TCK"), {}, {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            with open(f"/proc/{d}/status") as f:
                hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")]
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        procs[int(d)] = (sum(map(int, rest[11:15])) / tick, hwm[0] if hwm else 0, "python" in name)
        kids.setdefault(int(rest[1]), []).append(int(d))
    out, stack = {}, [os.getpid()]
    while stack:
        for c in kids.get(stack.pop(), []):
            out[c] = procs[c]
            stack.append(c)
    return out

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
out, warm, paths = sys.argv[1], sys.argv[2:4], sys.argv[4:]
# Start-up outside the timing: the JVM with its JIT warmed on these code paths, and Python
# workers that have imported kafkapy and compiled its schemas (as a long-running cluster's).
for bodies in ((), None, (), None):
    write_captures(spark, warm, out, mode="overwrite", bodies=bodies)
for mode, bodies in (("header", ()), ("full", None)):
    before, start = tree(), time.perf_counter()
    write_captures(spark, paths, out, mode="overwrite", bodies=bodies)
    wall, after = time.perf_counter() - start, tree()
    cpu = sum(c - before.get(pid, (0.0,))[0] for pid, (c, _, _) in after.items())
    workers = max(r for c, r, py in after.values() if py)
    jvm = max(r for c, r, py in after.values() if not py)
    print(mode, spark.read.parquet(out).count(), wall, cpu, workers, jvm)
spark.stop()
"""

_TSHARK_FIELDS = ["-Y", "kafka", "-T", "fields", "-e", "kafka.request_key", "-e", "kafka.request.version",
                  "-e", "kafka.correlation_id", "-e", "kafka.client_id", "-e", "kafka.response_key",
                  "-e", "kafka.error"]  # fmt: skip


def _run(args: list[str]) -> tuple[int, float, float, int]:
    """One local kafkapy run in a child process: (count, wall s, CPU s, max RSS KiB)."""
    out = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, check=True)
    count, wall, cpu, rss = out.stdout.split()[-4:]
    return int(count), float(wall), float(cpu), int(rss)


def _tshark(tshark: str, path: Path, output: list[str]) -> tuple[int, float, float, int]:
    """tshark on one file in a child process: (lines printed, wall s, CPU s, max RSS KiB)."""
    start = time.perf_counter()
    with subprocess.Popen([tshark, "-r", str(path), *output], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as proc:  # fmt: skip
        assert proc.stdout is not None
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: proc.stdout.read(1 << 20), b""))
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return lines, time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _add(totals: dict[str, list[float]], name: str, result: tuple[int, float, float, int]) -> None:
    count, wall, cpu, rss = result
    entry = totals.setdefault(name, [0, 0.0, 0.0, 0])
    entry[0] += count
    entry[1] += wall
    entry[2] += cpu
    entry[3] = max(entry[3], rss)


def run(options: Options) -> Report:
    total_mb = 8 if options.quick else int(os.environ.get("KAFKAPY_BENCH_CAPTURE_MB", "1000"))
    tshark = shutil.which("tshark")
    totals: dict[str, list[float]] = {}  # name -> [count, wall, cpu, max rss KiB]
    file_frames: list[int] = []
    with tempfile.TemporaryDirectory(prefix="kafkapy-bench-") as tmp:
        directory = Path(tmp)
        t0 = time.perf_counter()
        paths: list[Path] = []
        frames = 0
        for f in range(_FILES):
            sub = directory / f"f{f}"
            sub.mkdir()
            (path,), n = generate(sub, max(1, total_mb // _FILES), files=1, seed=f)
            paths.append(path)
            file_frames.append(n)
            frames += n
        gen = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in paths)
        for path in paths:
            # Interleaved per file, so every decoder meets the same noise.
            _add(totals, "header", _run(["header", str(path)]))
            if tshark is not None:
                _add(totals, "tshark-fields", _tshark(tshark, path, _TSHARK_FIELDS))
            _add(totals, "full", _run(["full", str(path)]))
            _add(totals, "framing", _run(["framing", str(path)]))
        # The same traffic at versions tshark dissects in full, bodies and records included.
        sub = directory / "dissected"
        sub.mkdir()
        (dissected,), dissected_frames = generate(
            sub, max(1, total_mb // _FILES), files=1, seed=50, versions=TSHARK_VERSIONS
        )
        _add(totals, "d-header", _run(["header", str(dissected)]))
        if tshark is not None:
            _add(totals, "d-tshark-fields", _tshark(tshark, dissected, _TSHARK_FIELDS))
        _add(totals, "d-full", _run(["full", str(dissected)]))
        if tshark is not None:
            _add(totals, "d-tshark-json", _tshark(tshark, dissected, ["-Y", "kafka", "-T", "json"]))
        jvm = 0
        try:
            import pyspark  # noqa: F401

            warm_dir = directory / "warm"
            warm_dir.mkdir()
            (warm,), _ = generate(warm_dir, min(20, max(1, total_mb // _FILES)), files=1, seed=99)
            # a second path to the same file: two tasks, so both Python workers warm up
            twin = warm_dir / "twin.pcap"
            twin.symlink_to(warm)
            out = subprocess.run(
                [sys.executable, "-c", _SPARK, str(directory / "out.parquet"), str(warm), str(twin),
                 *map(str, paths)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            for line in out.stdout.splitlines()[-2:]:
                mode, rows, wall, cpu, rss, jvm_rss = line.split()
                totals[f"spark-{mode}"] = [int(rows), float(wall), float(cpu), int(rss)]
                jvm = max(jvm, int(jvm_rss))
        except (ImportError, subprocess.CalledProcessError) as exc:
            print(f"spark run skipped: {exc}", file=sys.stderr)
    return _report(totals, frames, dissected_frames, size, len(paths), gen, jvm)


_ROWS = [
    # key, decoder, what it produces
    ("tshark-fields", "tshark -T fields", "header fields per packet (bodies too new to dissect)"),
    ("header", "kafkapy decode --bodies none", "paired header rows, no bodies"),
    ("full", "kafkapy decode", "paired rows, bodies as JSON, records decoded"),
    ("framing", "kafkapy framing only", "Kafka frames (pcap, TCP, framing)"),
    ("spark-header", "Spark local[2], --bodies none", "header rows to Parquet (spark-decode)"),
    ("spark-full", "Spark local[2], full", "full rows to Parquet (spark-decode)"),
]

# The second capture: the same traffic at versions tshark dissects in full.
_DISSECTED_ROWS = [
    ("d-tshark-fields", "tshark -T fields", "header fields per packet (dissects every body)"),
    ("d-header", "kafkapy decode --bodies none", "paired header rows, no bodies"),
    ("d-full", "kafkapy decode", "paired rows, bodies as JSON, records decoded"),
    ("d-tshark-json", "tshark -T json", "full dissection as JSON"),
]

_HEADERS = [
    "decoder", "produces", "frames/s per core", "x tshark -T fields", "wall s", "CPU s", "peak RSS MiB",
]  # fmt: skip


def _table(
    totals: dict[str, list[float]], rows: list[tuple[str, str, str]], frames: int
) -> tuple[dict[str, float], list[list[str]]]:
    """Per-core rates of ``rows`` (keys in ``totals``), and their table rows against the first."""
    per_core = {key: frames / totals[key][2] for key, *_ in rows if key in totals}
    base = per_core.get(rows[0][0])
    table_rows = []
    for key, name, produces in rows:
        if key not in totals:
            continue
        _, wall, cpu, rss = totals[key]
        ratio = f"{per_core[key] / base:.2f}" if base else "-"
        table_rows.append([name, produces, f"{per_core[key]:,.0f}", ratio, f"{wall:.1f}", f"{cpu:.1f}",
                           f"{rss / 1024:.0f}"])  # fmt: skip
    return per_core, table_rows


def _verdicts(per_core: dict[str, float], rows: list[tuple[str, str, str]], skip: tuple[str, ...]) -> str:
    base = per_core.get(rows[0][0])
    out = []
    for key, name, _ in rows[1:]:
        if base and key in per_core and key not in skip:
            ratio = per_core[key] / base
            out.append(f"{name}: {ratio:.2f}x ({'meets' if ratio >= 3 else 'misses'} the 3x target)")
    return "; ".join(out)


def _report(
    totals: dict[str, list[float]], frames: int, dissected_frames: int, size: int, files: int, gen: float,
    jvm_rss: int = 0,
) -> Report:
    per_core, table_rows = _table(totals, _ROWS, frames)
    d_per_core, d_rows = _table(totals, _DISSECTED_ROWS, dissected_frames)
    notes = [
        f"Measured {datetime.date.today().isoformat()} with `python -m benchmarks capture --write-docs`: "
        f"{files} synthetic captures, {size / 1e6:,.0f} MB in all, {frames:,} Kafka frames "
        f"({_CONNECTIONS} connections per file; generated in {gen:.0f} s) at the versions today's clients "
        "send (Produce v9, Fetch v12, Metadata v12). Frames/s per core: frames over "
        "the CPU seconds used; for Spark, by the JVM and its Python workers together (its wall time, shown "
        "too, swings with the load on the shared machine). Peak RSS is per process: for Spark the largest "
        "Python worker's" + (f" (the JVM's own peak was {jvm_rss / 1024:,.0f} MiB)." if jvm_rss else "."),
    ]
    checks = []
    if "header" in totals:
        header_rows, full_rows = int(totals["header"][0]), int(totals["full"][0])
        checks.append(f"kafkapy rows: {header_rows:,} (header), {full_rows:,} (full)")
    if "framing" in totals:
        checks.append(f"kafkapy frames: {int(totals['framing'][0]):,}")
    if "tshark-fields" in totals:
        checks.append(f"tshark -T fields lines: {int(totals['tshark-fields'][0]):,}")
    if checks:
        notes.append("Counts, as a check that everyone saw the same traffic: " + "; ".join(checks) + ".")
    # framing alone produces no rows: its ratio is in the table, not judged
    if verdicts := _verdicts(per_core, _ROWS, ("framing",)):
        notes.append("Against tshark -T fields per core: " + verdicts + ".")
    d_notes = [
        f"The same traffic at the newest versions tshark {_tshark_version()} dissects in full (Produce v8, "
        f"Fetch v11, Metadata v9): one capture of {dissected_frames:,} Kafka frames. Here tshark decodes "
        "every body and record, as the full decode does."
    ]
    if verdicts := _verdicts(d_per_core, _DISSECTED_ROWS, ("d-tshark-json",)):
        d_notes.append("Against tshark -T fields per core: " + verdicts + ".")
    if "d-tshark-json" in d_per_core and "d-full" in d_per_core:
        d_notes.append(
            f"Full decode against tshark -T json: {d_per_core['d-full'] / d_per_core['d-tshark-json']:.2f}x "
            "per core."
        )
    footer = f"{machine_note()}; {revision()}."
    text = "\n\n".join([
        render_table(_HEADERS, table_rows), "\n".join(notes),
        render_table(_HEADERS, d_rows), "\n".join(d_notes), footer,
    ])  # fmt: skip
    markdown = "\n\n".join([
        render_table(_HEADERS, table_rows, markdown=True), *notes,
        "At versions tshark dissects in full:", render_table(_HEADERS, d_rows, markdown=True),
        *d_notes, footer,
    ])  # fmt: skip
    return Report(text, markdown)


def _tshark_version() -> str:
    tshark = shutil.which("tshark")
    if tshark is None:
        return "(not installed)"
    try:
        out = subprocess.run([tshark, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "(unknown version)"
    words = out.split()
    return words[2] if len(words) > 2 and words[0] == "TShark" else "(unknown version)"
