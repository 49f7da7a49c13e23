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


def test_read_captures_matches_the_local_decoder(spark: Any) -> None:
    from kafkapy.spark import read_captures

    df = read_captures(spark, str(CAPTURES / "*.pcap"))
    assert tuple(df.columns) == COLUMNS
    assert df.rdd.getNumPartitions() == len(CAPTURE_FILES)  # one task per capture file
    got = []
    for r in df.collect():
        d = r.asDict()
        ts = d["ts"]
        d["ts"] = round(ts.timestamp() * 1_000_000) if ts is not None else None
        got.append(d)
    want = []
    for path in CAPTURE_FILES:
        for row in decode_capture(str(path.resolve())):
            row = dict(row)
            row["ts"] = round(row["ts"] * 1_000_000)
            want.append(row)
    assert len(got) == len(want) == 13
    got.sort(key=_key)
    want.sort(key=_key)
    for g, w in zip(got, want):
        for col in COLUMNS:
            if col == "latency_ms" and w[col] is not None:
                assert g[col] == pytest.approx(w[col])
            elif col == "topics":
                assert list(g[col] or []) == list(w[col] or [])
            else:
                assert g[col] == w[col], col
    assert {r["api_key"] for r in got} == {0, 1, 8, 11, 12, 13, 14, 18}
    assert all(r["status"] == "ok" and r["client_id"] for r in got)


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


def test_spark_decode_cli_writes_parquet_and_summary(spark: Any, tmp_path: Path) -> None:
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
