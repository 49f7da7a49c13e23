"""kafkapy.spark: read_captures (one task per file, same rows as the local decoder),
the Arrow UDFs over binary frames, spark-decode's Parquet and summaries.

One local[2] SparkSession for the module; shuffles kept to 2 partitions."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

from kafkapy.capture import Frame, FrameReader  # noqa: E402
from kafkapy.capture.rows import COLUMNS, decode_capture  # noqa: E402
from kafkapy.protocol import encode_request, encode_response  # noqa: E402

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap"))


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkapy-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield session
    session.stop()


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["capture"], row["connection_id"], row["correlation_id"], row["status"])


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    ts = out.pop("ts")
    out["ts_us"] = None if ts is None else (round(ts * 1_000_000) if isinstance(ts, float) else ts)
    out["topics"] = list(out["topics"]) if out["topics"] is not None else None
    return out


def _local_rows(**options: Any) -> list[dict[str, Any]]:
    want = []
    for path in CAPTURE_FILES:
        for row in decode_capture(str(path.resolve()), **options):
            row = dict(row)
            row["ts"] = round(row["ts"] * 1_000_000)
            want.append(row)
    return want


def _assert_same_rows(spark_rows: list[Any], want: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spark Rows against the local decoder's rows, column by column (ts to the microsecond)."""
    got = []
    for r in spark_rows:
        d = r.asDict()
        ts = d["ts"]
        d["ts"] = round(ts.timestamp() * 1_000_000) if ts is not None else None
        got.append(d)
    assert len(got) == len(want)
    got.sort(key=_key)
    want = sorted(want, key=_key)
    for g, w in zip(got, want):
        for col in COLUMNS:
            if col == "latency_ms" and w[col] is not None:
                assert g[col] == pytest.approx(w[col])
            elif col == "topics":
                assert list(g[col] or []) == list(w[col] or [])
            elif col == "errors" and w[col] is not None:  # Spark's structs have every key, null where absent
                assert [{k: v for k, v in e.asDict().items() if v is not None} for e in g[col]] == [
                    {k: v for k, v in e.items() if v is not None} for e in w[col]]
            else:
                assert g[col] == w[col], col
    return got


def test_read_captures_matches_the_local_decoder(spark: Any) -> None:
    from kafkapy.spark import read_captures

    df = read_captures(spark, str(CAPTURES / "*.pcap"))
    assert tuple(df.columns) == COLUMNS
    assert df.rdd.getNumPartitions() == len(CAPTURE_FILES)  # one task per capture file
    got = _assert_same_rows(df.collect(), _local_rows())
    assert len(got) == 13
    assert {r["api_key"] for r in got} == {0, 1, 8, 11, 12, 13, 14, 18}
    assert all(r["status"] == "ok" and r["client_id"] for r in got)


@pytest.mark.parametrize("options", [{}, {"bodies": ()}, {"decode_records": False}], ids=str)
def test_write_captures_matches_the_local_decoder(
    spark: Any, tmp_path: Path, options: dict[str, Any]
) -> None:
    import pyarrow.parquet as pq

    from kafkapy.capture.rows import arrow_schema
    from kafkapy.spark import write_captures

    out = tmp_path / "rows"
    parts = write_captures(spark, str(CAPTURES / "*.pcap"), out, **options)
    # one Parquet file per capture, each written by its own task, plus Spark's _SUCCESS marker
    assert len(parts) == len(CAPTURE_FILES) == len(set(p for p, _ in parts))
    assert sorted(os.listdir(out)) == sorted([os.path.basename(p) for p, _ in parts] + ["_SUCCESS"])
    for path, rows in parts:
        assert pq.read_schema(path).equals(arrow_schema())
        assert pq.read_metadata(path).num_rows == rows
    got = _assert_same_rows(spark.read.parquet(str(out)).collect(), _local_rows(**options))
    assert len(got) == 13
    if options.get("bodies") == ():
        assert all(r["request"] is None and r["response"] is None for r in got)


def test_write_captures_save_modes(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from kafkapy.spark import write_captures

    out = tmp_path / "rows"
    first = write_captures(spark, [str(CAPTURE_FILES[0])], out)
    with pytest.raises(FileExistsError):
        write_captures(spark, [str(CAPTURE_FILES[1])], out)
    # append: a new capture adds its part; the same capture again replaces its own
    write_captures(spark, [str(p) for p in CAPTURE_FILES[:2]], out, mode="append")
    assert pq.read_table(str(out)).num_rows == sum(
        1 for p in CAPTURE_FILES[:2] for _ in decode_capture(str(p))
    )
    write_captures(spark, [str(CAPTURE_FILES[1])], out, mode="overwrite")
    assert not os.path.exists(first[0][0])
    assert pq.read_table(str(out)).num_rows == sum(1 for _ in decode_capture(str(CAPTURE_FILES[1])))
    with pytest.raises(ValueError, match="unknown save mode"):
        write_captures(spark, [str(CAPTURE_FILES[1])], out, mode="ignore-me")
    # an output path that is a file is refused in every mode, and the file is left alone
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    for mode in ("errorifexists", "overwrite", "append"):
        with pytest.raises(NotADirectoryError, match="is a file, not an output directory"):
            write_captures(spark, [str(CAPTURE_FILES[1])], a_file, mode=mode)
    assert a_file.read_text() == "keep me"


def test_write_captures_hostile_file_becomes_an_undecodable_row(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from kafkapy.spark import write_captures

    bad = tmp_path / "bad.pcap"
    bad.write_bytes(os.urandom(3000))
    ((path, rows),) = write_captures(spark, [str(bad)], tmp_path / "out")
    table = pq.read_table(path).to_pylist()
    assert rows == len(table) == 1 and table[0]["status"] == "undecodable"
    assert "capture error" in table[0]["reason"]
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith(".")]  # no partial file left


def test_hostile_file_becomes_an_undecodable_row(spark: Any, tmp_path: Path) -> None:
    from kafkapy.spark import read_captures

    bad = tmp_path / "bad.pcap"
    bad.write_bytes(os.urandom(3000))
    rows = read_captures(spark, [str(bad)]).collect()
    assert len(rows) == 1 and rows[0]["status"] == "undecodable"
    assert "capture error" in rows[0]["reason"]


def test_udfs_decode_a_dataframe_of_frames(spark: Any) -> None:
    from kafkapy.spark import decode_request, decode_response

    frames: list[tuple[bytes, bytes | None]] = []
    for path in CAPTURE_FILES:
        events = FrameReader(path)
        requests = [e for e in events if isinstance(e, Frame) and e.from_client and not e.truncated]
        frames.extend((f.body, None) for f in requests)
    metadata = encode_request(3, 12, 99, "udf-client", {"topics": None, "allow_auto_topic_creation": False})
    response = encode_response(
        3, 12, 99,
        {"brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}], "cluster_id": "c",
         "controller_id": 1, "topics": []},
    )  # fmt: skip
    frames.append((metadata, response))
    frames.append((b"\x00\x03\x00", None))  # too short: an error, not an exception
    df = spark.createDataFrame(frames, "request binary, response binary")
    req = df.select(decode_request("request").alias("r"), "response").select("r.*", "response")
    rows = req.collect()
    assert len(rows) == len(frames)
    good = [r for r in rows if r["error"] is None]
    assert len(good) == len(frames) - 1
    assert all(r["body"].startswith("{") for r in good)
    meta = next(r for r in rows if r["api_key"] == 3)
    assert (meta["api_name"], meta["api_version"], meta["correlation_id"], meta["client_id"]) == (
        "Metadata", 12, 99, "udf-client"
    )
    bad = next(r for r in rows if r["error"] is not None)
    assert bad["api_key"] is None
    resp = (
        req.where("api_key = 3")
        .select(decode_response("response", "api_key", "api_version").alias("x"))
        .select("x.*")
        .collect()
    )
    assert resp[0]["correlation_id"] == 99 and resp[0]["error"] is None
    assert '"cluster_id":"c"' in resp[0]["body"]


def test_read_captures_writes_parquet_and_summarizes(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from kafkapy.spark import read_captures, summarize

    out = tmp_path / "out"
    read_captures(spark, [str(p) for p in CAPTURE_FILES]).write.parquet(str(out))
    table = pq.read_table(str(out))
    assert table.num_rows == 13
    assert tuple(table.column_names) == COLUMNS
    summary = summarize(spark.read.parquet(str(out)))
    assert summary.per_api["Fetch"] == 4 and summary.per_api["Produce"] == 3
    assert summary.per_topic["zqy-test"] == 2
    assert summary.latency["Heartbeat"][50.0] == pytest.approx(0.277, abs=0.01)
    text = summary.table()
    assert "requests per topic" in text and "latency (ms)" in text
    png = tmp_path / "s.png"
    summary.plot(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_spark_decode_cli_writes_parquet_and_summary(tmp_path: Path) -> None:
    """The command in its own process (it starts and stops its own SparkSession)."""
    import subprocess

    import pyarrow.parquet as pq

    out = tmp_path / "out"
    run_cli = "import sys; from kafkapy.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", run_cli, "spark-decode", str(CAPTURES), "--output", str(out),
           "--master", "local[1]", "--summary"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{len(CAPTURE_FILES)} captures, 13 rows to {out}" in done.stderr
    assert "requests per topic" in done.stderr
    table = pq.read_table(str(out))
    assert table.num_rows == 13 and tuple(table.column_names) == COLUMNS
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 2 and "already exists" in again.stderr


def test_udf_bodies_equal_the_body_decoders_json() -> None:
    """The UDFs write bodies with the JSON decoders: the same text (and error_code, and error) as
    to_json of the Body decoders' output. Called on Arrow arrays directly; no Spark needed."""
    import pyarrow as pa

    from kafkapy.capture.rows import to_json
    from kafkapy.errors import DecodeError
    from kafkapy.protocol import decode_request, decode_response
    from kafkapy.spark import _request_struct, _response_struct

    def outcome(decode: Any, *args: Any) -> tuple[Any, Any, Any]:
        try:
            body = decode(*args).body
        except DecodeError as exc:
            return None, str(exc), None
        return to_json(body), None, body.get("error_code")

    requests: list[bytes] = []
    responses: list[tuple[bytes, int, int]] = []
    key = version = None
    for path in CAPTURE_FILES:
        for e in FrameReader(path):
            if isinstance(e, Frame) and e.from_client:
                requests += [e.body, e.body[: len(e.body) // 2]]  # whole, and cut short
                key, version = e.api_key, e.api_version
            elif isinstance(e, Frame) and key is not None and version is not None:
                responses += [(e.body, key, version), (e.body[: len(e.body) * 2 // 3], key, version)]
    got = _request_struct(pa.array(requests, pa.binary())).to_pylist()
    for frame, row in zip(requests, got):
        assert (row["body"], row["error"]) == outcome(decode_request, frame)[:2]
    frames, keys, versions = zip(*responses)
    got = _response_struct(pa.array(frames), pa.array(keys, pa.int32()), pa.array(versions, pa.int32()))
    for (frame, key, version), row in zip(responses, got.to_pylist()):
        assert (row["body"], row["error"], row["error_code"]) == outcome(decode_response, frame, key, version)
    assert sum(r["error"] is None for r in got.to_pylist()) >= len(CAPTURE_FILES)


def _spark_decode(*args: str, env: dict[str, str] | None = None) -> Any:
    import subprocess

    run_cli = "import sys; from kafkapy.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}
    return subprocess.run([sys.executable, "-c", run_cli, "spark-decode", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def _junk(tmp_path: Path) -> list[str]:
    (tmp_path / "notacapture.pcap").write_text("not a capture\n")
    (tmp_path / "empty.pcap").write_bytes(b"")
    (tmp_path / "half.pcap").write_bytes((CAPTURES / "00-produce-v7-sw8.pcap").read_bytes()[:535])
    return [str(tmp_path / name) for name in ("empty.pcap", "half.pcap", "notacapture.pcap")]


def test_spark_decode_reports_the_per_file_errors_decode_does_and_nothing_else(tmp_path: Path) -> None:
    from kafkapy.cli import main

    junk = _junk(tmp_path)
    tls = _tls_capture(tmp_path)  # its row says it was skipped; it is not a file error
    done = _spark_decode(*junk, str(CAPTURE_FILES[0]), tls, "--output", str(tmp_path / "out"),
                         "--master", "local[1]")
    assert done.returncode == 1, done.stderr
    decoded = _decode_cli_errors(main, [*junk, tls])
    assert done.stderr.splitlines() == [
        *(line.replace("kafkapy decode:", "kafkapy spark-decode:") for line in decoded),
        f"kafkapy spark-decode: 5 captures, 6 rows to {tmp_path / 'out'}",
    ]  # no JVM notices, log4j lines or pandas warnings
    assert not any("tls.pcap" in line for line in decoded)


def _tls_capture(tmp_path: Path) -> str:
    """One connection to 9092 that opens with a TLS handshake record."""
    from kafkapy.capture import PcapWriter, TcpFlow

    flow = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    hello = b"\x16\x03\x01\x00\x10" + bytes(16)
    path = tmp_path / "tls.pcap"
    with PcapWriter(path) as w:
        for ts, frame in flow.handshake(1.0) + flow.send(True, hello, 1.1) + flow.close(1.2):
            w.write(frame, ts)
    return str(path)


def _decode_cli_errors(main: Any, paths: list[str]) -> list[str]:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["decode", *paths]) == 1
    return err.getvalue().splitlines()


def test_spark_decode_checks_the_output_before_starting_spark(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    # A SPARK_HOME with no spark-submit: had Spark been started, it would have failed otherwise.
    no_spark = {"SPARK_HOME": str(tmp_path / "no-spark")}
    exists = _spark_decode(str(CAPTURE_FILES[0]), "--output", str(tmp_path / "out"), env=no_spark)
    assert exists.returncode == 2
    assert exists.stderr == (f"kafkapy spark-decode: error: {tmp_path / 'out'} already exists "
                             "(mode 'overwrite' or 'append' to write anyway)\n")
    plot = _spark_decode(str(CAPTURE_FILES[0]), "--output", str(tmp_path / "new"), "--summary-plot",
                         str(tmp_path / "no" / "p.png"), env=no_spark)
    assert plot.returncode == 2
    assert plot.stderr == (f"kafkapy spark-decode: error: cannot write {tmp_path / 'no' / 'p.png'}: "
                           "no such directory\n")
    bogus = _spark_decode(str(CAPTURE_FILES[0]), "--output", str(tmp_path / "new"), "--master", "bogus://x",
                          env=no_spark)
    assert bogus.returncode == 2 and len(bogus.stderr.splitlines()) == 1
    assert "'bogus://x' is not a Spark master" in bogus.stderr
    filtered = _spark_decode(str(CAPTURE_FILES[0]), "--output", str(tmp_path / "new"), "--bodies", "none",
                             "--errors-only", env=no_spark)
    assert filtered.returncode == 2
    assert filtered.stderr == ("kafkapy spark-decode: error: --errors-only reads decoded bodies, which "
                               "--bodies none leaves out\n")


@pytest.mark.parametrize("options", [
    {"errors_only": True}, {"api": "Fetch,JoinGroup", "client_id": ["consumer-frauddetectionservice-1"]},
    {"api": [0, 1]}, {"topic": "zqy-test"}], ids=str)  # fmt: skip
def test_the_filters_keep_the_rows_the_local_decoder_keeps(
    spark: Any, tmp_path: Path, options: dict[str, Any]
) -> None:
    from kafkapy.spark import read_captures, write_captures

    want = _local_rows(**options)
    _assert_same_rows(read_captures(spark, str(CAPTURES / "*.pcap"), **options).collect(), want)
    write_captures(spark, str(CAPTURES / "*.pcap"), tmp_path / "rows", **options)
    _assert_same_rows(spark.read.parquet(str(tmp_path / "rows")).collect(), want)
    with pytest.raises(ValueError, match="unknown API 'Prodyce'"):
        read_captures(spark, str(CAPTURES / "*.pcap"), api="Prodyce")


def test_a_master_spark_rejects_is_one_line_naming_the_log(tmp_path: Path) -> None:
    import re

    done = _spark_decode(str(CAPTURE_FILES[0]), "--output", str(tmp_path / "out"), "--master", "local[abc]")
    assert done.returncode == 1
    match = re.fullmatch(r"kafkapy spark-decode: cannot start Spark \(--master local\[abc\]\): Could not "
                         r"parse Master URL: 'local\[abc\]' \(Spark's log: (\S+)\)\n", done.stderr)
    assert match, done.stderr
    log = Path(match.group(1))
    assert "SparkException" in log.read_text()
    log.unlink()
    verbose = _spark_decode(str(CAPTURE_FILES[0]), "--output", str(tmp_path / "out"),
                            "--master", "local[abc]", "--verbose")
    assert verbose.returncode == 1 and "SparkException" in verbose.stderr  # Spark's own output let through
    assert verbose.stderr.splitlines()[-1] == ("kafkapy spark-decode: cannot start Spark (--master "
                                               "local[abc]): Could not parse Master URL: 'local[abc]'")


TLS = Path(__file__).resolve().parents[1] / "data" / "tls"


def test_the_key_log_decrypts_tls_as_the_local_decoder_does(spark: Any, tmp_path: Path) -> None:
    from kafkapy.capture.keylog import KeyLogError
    from kafkapy.spark import read_captures, write_captures

    capture, keys = TLS / "tls-kafka-python.pcap", TLS / "tls-kafka-python.keys"
    want = [dict(row, ts=round(row["ts"] * 1_000_000)) for row in
            decode_capture(str(capture), tls_keylog=keys)]  # fmt: skip
    assert len(want) == 19 and {row["status"] for row in want} == {"ok"}
    _assert_same_rows(read_captures(spark, str(capture), tls_keylog=keys).collect(), want)
    write_captures(spark, str(capture), tmp_path / "rows", tls_keylog=str(keys))
    _assert_same_rows(spark.read.parquet(str(tmp_path / "rows")).collect(), want)
    with pytest.raises(KeyLogError, match="cannot read the TLS key log"):
        read_captures(spark, str(capture), tls_keylog=tmp_path / "missing.keys")  # on the driver
    no_spark = {"SPARK_HOME": str(tmp_path / "no-spark")}
    missing = _spark_decode(str(capture), "--output", str(tmp_path / "new"), "--tls-keylog",
                            str(tmp_path / "missing.keys"), env=no_spark)
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1
    assert missing.stderr.startswith("kafkapy spark-decode: error: cannot read the TLS key log")


def test_the_summary_has_a_line_per_tls_connection_not_decrypted(spark: Any) -> None:
    from kafkapy.capture.summary import Summary
    from kafkapy.spark import read_captures, summarize

    capture = str(TLS / "tls-kafka-python.pcap")
    local = Summary().add_all(decode_capture(capture, kafka_ports=[40727]))
    assert len(local.tls) == 6 and all("TLS, no keys" in line for line in local.tls)
    assert summarize(read_captures(spark, capture, kafka_ports=[40727])).tls == local.tls
