"""Capture decoding throughput: kafkapy.capture locally and on Spark, against tshark.

The input is synthetic, written with kafkapy.capture.writer into a temporary
directory: several captures (one per Spark task) of Ethernet/IPv4/TCP at a
1460-byte MSS, each with a few dozen pipelined client connections carrying a
realistic mix (ApiVersions, Metadata, Produce with 10-record batches, Fetch
responses with records, Heartbeat, OffsetCommit). The issue asks for 1 GB;
the default total here is 80 MB so the whole benchmark stays near 90 s on a
two-core machine (``KAFKAPY_BENCH_CAPTURE_MB`` changes it).

Measured, each in its own process so peak memory (max RSS) is per run:

* ``kafkapy decode`` work (``decode_capture``: reassembly, framing, pairing,
  full decode, JSON rows with records decoded), every capture in turn, one core;
* the layers below decoding alone (``FrameReader``: pcap, IP, TCP reassembly,
  Kafka framing), to show where the time goes;
* the same with Spark local[2]: ``read_captures(...).write.parquet``;
* ``tshark -T fields`` extracting Kafka header fields from the same files
  (its dissector decodes every request and response body it knows).

Frames per second counts Kafka frames (requests + responses). Throughput
per core divides by the CPU seconds used (tshark, kafkapy local) or by the
cores given (Spark).
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import Options, Report, machine_note, render_table, revision

TITLE = "Capture decoding throughput"

_FILES = 4
_CONNECTIONS = 24


def _frames() -> list[tuple[bytes, bytes | None]]:
    """(request, response) frame bodies of the mix, before correlation ids are set."""
    from kafkapy.protocol import build_record_batch, encode_request, encode_response

    rnd = random.Random(7)

    def batch(n: int, base: int = 0) -> bytes:
        return build_record_batch(
            [(f"key-{i}".encode(), rnd.randbytes(100), [("trace", b"abc")]) for i in range(n)],
            base_offset=base, base_timestamp=1_767_225_600_000,
        )  # fmt: skip

    meta_resp = {
        "throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "broker-1", "port": 9092, "rack": None}],
        "cluster_id": "bench", "controller_id": 1,
        "topics": [{"error_code": 0, "name": "orders", "topic_id": None, "is_internal": False,
                    "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                                    "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}
                                   for p in range(6)], "topic_authorized_operations": -2147483648}],
    }  # fmt: skip
    produce = encode_request(0, 9, 0, "bench-producer", {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": batch(10)}]}]})
    produce_resp = encode_response(0, 9, 0, {
        "responses": [{"name": "orders", "partition_responses": [{
            "index": 0, "error_code": 0, "base_offset": 100, "log_append_time_ms": -1, "log_start_offset": 0,
            "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0})
    fetch = encode_request(1, 12, 0, "bench-consumer", {
        "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "orders", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                    "fetch_offset": 100, "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 1048576}]}], "forgotten_topics_data": [], "rack_id": ""})
    fetch_resp = encode_response(1, 12, 0, {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
        "responses": [{"topic": "orders", "partitions": [{
            "partition_index": 0, "error_code": 0, "high_watermark": 200, "last_stable_offset": 200,
            "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
            "records": batch(10, 100)}]}]})
    heartbeat = encode_request(12, 4, 0, "bench-consumer", {
        "group_id": "g", "generation_id": 1, "member_id": "m-1", "group_instance_id": None})
    heartbeat_resp = encode_response(12, 4, 0, {"throttle_time_ms": 0, "error_code": 0})
    metadata = encode_request(3, 12, 0, "bench-consumer", {
        "topics": [{"topic_id": None, "name": "orders"}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    versions = encode_request(18, 3, 0, "bench-consumer", {
        "client_software_name": "bench", "client_software_version": "1"})
    versions_resp = encode_response(18, 3, 0, {"error_code": 0, "api_keys": [
        {"api_key": k, "min_version": 0, "max_version": 9} for k in range(20)], "throttle_time_ms": 0,
        "supported_features": [], "finalized_features_epoch": -1, "finalized_features": [],
        "zk_migration_ready": False})
    return [
        (versions, versions_resp), (metadata, encode_response(3, 12, 0, meta_resp)),
        (produce, produce_resp), (produce, produce_resp), (fetch, fetch_resp), (fetch, fetch_resp),
        (heartbeat, heartbeat_resp),
    ]  # fmt: skip


def generate(directory: Path, total_mb: int, files: int = _FILES) -> tuple[list[Path], int]:
    """Write ``files`` captures totalling about ``total_mb``; returns them and the Kafka frame count."""
    from kafkapy.capture import PcapWriter, TcpFlow

    mix = _frames()
    paths: list[Path] = []
    frames = 0
    per_file = total_mb * 1_000_000 // files
    for f in range(files):
        path = directory / f"bench-{f}.pcap"
        paths.append(path)
        with PcapWriter(path) as w:
            flows = [
                TcpFlow((f"10.1.{f}.{c + 1}", 40000 + c), ("10.0.0.1", 9092)) for c in range(_CONNECTIONS)
            ]
            corr = [0] * _CONNECTIONS
            ts = 1_767_225_600.0
            for c, flow in enumerate(flows):
                for t, pkt in flow.handshake(ts + c * 1e-4):
                    w.write(pkt, t)
            size = 0
            i = 0
            while size < per_file:
                c = i % _CONNECTIONS
                req, resp = mix[(i // _CONNECTIONS) % len(mix)]
                corr[c] += 1
                ts += 0.0002
                body = bytearray(req)
                struct.pack_into(">i", body, 4, corr[c])
                for t, pkt in flows[c].send(True, struct.pack(">i", len(body)) + body, ts):
                    w.write(pkt, t)
                    size += len(pkt) + 16
                frames += 1
                if resp is not None:
                    rbody = bytearray(resp)
                    struct.pack_into(">i", rbody, 0, corr[c])
                    for t, pkt in flows[c].send(False, struct.pack(">i", len(rbody)) + rbody, ts + 0.0001):
                        w.write(pkt, t)
                        size += len(pkt) + 16
                    frames += 1
                i += 1
            for flow in flows:
                for t, pkt in flow.close(ts + 0.001):
                    w.write(pkt, t)
    return paths, frames


_LOCAL = """
import sys, time, resource
from kafkapy.capture.rows import decode_capture
start = time.perf_counter(); cpu = time.process_time()
rows = 0
for path in sys.argv[1:]:
    for row in decode_capture(path):
        rows += 1
wall = time.perf_counter() - start
print(rows, wall, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

_FRAMING = """
import sys, time, resource
from kafkapy.capture import FrameReader
start = time.perf_counter(); cpu = time.process_time()
rows = 0
for path in sys.argv[1:]:
    for event in FrameReader(path):
        rows += 1
wall = time.perf_counter() - start
print(rows, wall, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

_SPARK = """
import os, sys, time, resource
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession
from kafkapy.spark import read_captures
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
spark.range(4).count()  # start-up outside the timing
out, paths = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
read_captures(spark, paths).write.mode("overwrite").parquet(out)
wall = time.perf_counter() - start
rows = spark.read.parquet(out).count()
spark.stop()
ch = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(rows, wall, 0.0, max(ch, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""


def _run(code: str, args: list[str]) -> tuple[int, float, float, int]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    rows, wall, cpu, rss = out.stdout.split()[-4:]
    return int(rows), float(wall), float(cpu), int(rss)


def _tshark(paths: list[Path]) -> tuple[int, float, float, int] | None:
    tshark = shutil.which("tshark")
    if tshark is None:
        return None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    lines = 0
    for path in paths:
        out = subprocess.run(
            [tshark, "-r", str(path), "-Y", "kafka", "-T", "fields", "-e", "kafka.request_key",
             "-e", "kafka.request.version", "-e", "kafka.correlation_id", "-e", "kafka.client_id",
             "-e", "kafka.response_key", "-e", "kafka.error"],
            capture_output=True, check=True,
        )  # fmt: skip
        lines += out.stdout.count(b"\n")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return lines, wall, cpu, after.ru_maxrss


def run(options: Options) -> Report:
    total_mb = 4 if options.quick else int(os.environ.get("KAFKAPY_BENCH_CAPTURE_MB", "80"))
    with tempfile.TemporaryDirectory(prefix="kafkapy-bench-") as tmp:
        directory = Path(tmp)
        t0 = time.perf_counter()
        paths, frames = generate(directory, total_mb)
        gen = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in paths)
        args = [str(p) for p in paths]
        results: dict[str, tuple[int, float, float, int, int]] = {}  # rows, wall, cpu, rss KiB, cores
        rows, wall, cpu, rss = _run(_LOCAL, args)
        results["kafkapy decode (local, 1 process)"] = (rows, wall, cpu, rss, 1)
        rows_f, wall_f, cpu_f, rss_f = _run(_FRAMING, args)
        results["kafkapy framing only (no bodies)"] = (rows_f, wall_f, cpu_f, rss_f, 1)
        try:
            import pyspark  # noqa: F401

            rows_s, wall_s, _, rss_s = _run(_SPARK, [str(directory / "out.parquet"), *args])
            results["kafkapy on Spark local[2]"] = (rows_s, wall_s, wall_s * 2, rss_s, 2)
        except (ImportError, subprocess.CalledProcessError) as exc:
            print(f"spark run skipped: {exc}", file=sys.stderr)
        t = _tshark(paths)
        if t is not None:
            lines, wall_t, cpu_t, rss_t = t
            results["tshark -T fields"] = (lines, wall_t, cpu_t, rss_t, 1)
    headers = ["decoder", "wall s", "CPU s", "frames/s", "frames/s per core", "MB/s", "peak RSS MiB"]
    table_rows = []
    per_core: dict[str, float] = {}
    for name, (_, wall, cpu, rss, cores) in results.items():
        basis = cpu if cpu > 0 else wall * cores
        per_core[name] = frames / basis
        table_rows.append([
            name, f"{wall:.1f}", f"{basis:.1f}", f"{frames / wall:,.0f}", f"{frames / basis:,.0f}",
            f"{size / 1e6 / wall:.1f}", f"{rss / 1024:.0f}",
        ])  # fmt: skip
    notes = [
        f"{len(paths)} synthetic captures, {size / 1e6:.0f} MB in all, {frames:,} Kafka frames "
        f"({_CONNECTIONS} connections per file; generated in {gen:.0f} s). Spark's CPU column is "
        "wall x 2 cores; its RSS is the driver's (the JVM and Python workers are separate processes).",
    ]
    tshark_key = "tshark -T fields"
    if tshark_key in per_core:
        for name, value in per_core.items():
            if name != tshark_key:
                notes.append(f"{name}: {value / per_core[tshark_key]:.2f}x tshark's frames/s per core.")
    notes.append(f"{machine_note()}; {revision()}.")
    text = render_table(headers, table_rows) + "\n\n" + "\n".join(notes)
    markdown = render_table(headers, table_rows, markdown=True) + "\n\n" + "\n\n".join(notes)
    return Report(text, markdown)
