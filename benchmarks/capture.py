"""Capture decoding throughput: kafkapy.capture locally and on Spark, against tshark.

The input is synthetic, written with kafkapy.capture.writer into a temporary
directory: four captures (one per Spark task) of Ethernet/IPv4/TCP at a
1460-byte MSS, each with two dozen pipelined client connections carrying a
realistic mix (ApiVersions, Metadata, Produce with 10-record batches, Fetch
responses with records, Heartbeat). The total is 1 GB, as the issue asks
(``KAFKAPY_BENCH_CAPTURE_MB`` changes it; ``--quick`` writes 8 MB).

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
from pathlib import Path

from benchmarks import Options, Report, machine_note, render_table, revision

TITLE = "Capture decoding throughput"

_FILES = 4
_CONNECTIONS = 24


#: API key -> the version the second capture uses: the newest each has that tshark 4.0 dissects.
TSHARK_VERSIONS = {18: 3, 3: 9, 0: 8, 1: 11, 12: 4}


def _frames(versions: dict[int, int] | None = None) -> list[tuple[bytes, bytes | None]]:
    """(request, response) frame bodies of the mix, before correlation ids are set.

    ``versions`` re-encodes the mix at other versions (API key -> version), the same
    values fitted to the fields each version has."""
    from kafkapy.protocol import build_record_batch
    from kafkapy.protocol import encode_request as encode_request_newest
    from kafkapy.protocol import encode_response as encode_response_newest
    from kafkapy.protocol.codec import fit_body

    def encode_request(api_key: int, version: int, corr: int, client: str, body: dict) -> bytes:
        v = versions.get(api_key, version) if versions else version
        return encode_request_newest(api_key, v, corr, client, fit_body(api_key, "request", v, body))

    def encode_response(api_key: int, version: int, corr: int, body: dict) -> bytes:
        v = versions.get(api_key, version) if versions else version
        return encode_response_newest(api_key, v, corr, fit_body(api_key, "response", v, body))

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
    api_versions = encode_request(18, 3, 0, "bench-consumer", {
        "client_software_name": "bench", "client_software_version": "1"})
    versions_resp = encode_response(18, 3, 0, {"error_code": 0, "api_keys": [
        {"api_key": k, "min_version": 0, "max_version": 9} for k in range(20)], "throttle_time_ms": 0,
        "supported_features": [], "finalized_features_epoch": -1, "finalized_features": [],
        "zk_migration_ready": False})
    return [
        (api_versions, versions_resp), (metadata, encode_response(3, 12, 0, meta_resp)),
        (produce, produce_resp), (produce, produce_resp), (fetch, fetch_resp), (fetch, fetch_resp),
        (heartbeat, heartbeat_resp),
    ]  # fmt: skip


def generate(
    directory: Path, total_mb: int, files: int = _FILES, seed: int = 0, versions: dict[int, int] | None = None
) -> tuple[list[Path], int]:
    """Write ``files`` captures totalling about ``total_mb``; returns them and the Kafka frame count."""
    from kafkapy.capture import PcapWriter, TcpFlow

    mix = _frames(versions)
    paths: list[Path] = []
    frames = 0
    per_file = total_mb * 1_000_000 // files
    for f in range(files):
        path = directory / f"bench-{seed + f}.pcap"
        paths.append(path)
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
