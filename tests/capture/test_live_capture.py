"""Real clients, a real capture: kafka-python, confluent-kafka and kcat talk to
kafkapy's embedded broker on loopback while dumpcap records the traffic; the
capture is decoded by ``kafkapy decode`` and by Spark, and checked against
tshark's own Kafka dissector (API keys it knows, <= 47) and against what the
clients themselves received (DescribeCluster, key 60, which tshark 4.0 does
not dissect).

Skipped, with the reason, when dumpcap/tshark are missing or capturing on
``lo`` is not permitted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from live_capture import TSHARK, capturing

from kafkapy.cli import main as cli_main
from kafkapy.embedded import Broker

KCAT = shutil.which("kcat")
TSHARK_MAX_KEY = 47  # tshark 4.x dissects API keys up to here


@attrs.define
class Live:
    path: Path
    port: int
    seen: dict[str, Any]  # what each client received


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    pytest.importorskip("confluent_kafka")
    path = tmp_path_factory.mktemp("live") / "live.pcapng"
    seen: dict[str, Any] = {}
    with Broker() as broker:
        bootstrap = broker.bootstrap_servers
        port = int(bootstrap.rsplit(":", 1)[1])
        with capturing(path, port):
            import confluent_kafka.admin

            ck = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "client.id": "ck-admin"})
            md = ck.list_topics(timeout=10)
            seen["ck-admin"] = {"cluster_id": md.cluster_id, "brokers": sorted(md.brokers)}

            from kafka import KafkaAdminClient

            kp = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=10000)
            seen["kp-admin"] = kp.describe_cluster()
            kp.close()

            if KCAT is not None:
                out = subprocess.run(
                    [KCAT, "-b", bootstrap, "-L", "-J", "-X", "client.id=kcat-cli", "-m", "10"],
                    capture_output=True, text=True, timeout=30, check=True,
                )  # fmt: skip
                seen["kcat-cli"] = json.loads(out.stdout)
    yield Live(path, port, seen)


def _decode_cli(live: Live, tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    out = tmp_path / "rows.jsonl"
    assert cli_main(["decode", str(live.path), "--output", str(out), *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def _tshark_requests(live: Live) -> Counter[tuple[int, int, int, str]]:
    """(api key, version, correlation id, client id) of every request tshark dissects."""
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(live.path), "-d", f"tcp.port=={live.port},kafka", "-Y",
         f"kafka && tcp.dstport=={live.port}", "-T", "fields", "-E", "separator=|",
         "-e", "kafka.request_key", "-e", "kafka.request.version", "-e", "kafka.correlation_id",
         "-e", "kafka.client_id"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    found: Counter[tuple[int, int, int, str]] = Counter()
    for line in out.stdout.splitlines():
        keys, versions, corrs, clients = line.split("|")
        # one TCP segment may carry several PDUs: tshark joins their values with commas
        for k, v, c, cid in zip(keys.split(","), versions.split(","), corrs.split(","), clients.split(",")):
            found[(int(k), int(v), int(c), cid)] += 1
    return found


def test_cli_decodes_every_exchange(live: Live, tmp_path: Path) -> None:
    rows = _decode_cli(live, tmp_path, "--kafka-port", str(live.port))
    assert rows
    # librdkafka drops its bootstrap connection once it knows the brokers, sometimes with a request
    # still in flight: that one row is legitimately unanswered, and the reason must say the client
    # closed the connection. Nothing else may be anything but ok.
    hung_up = [r for r in rows if r["status"] == "unmatched_request"]
    assert all(r["reason"] == "the connection ended (closed with FIN) before a response" for r in hung_up)
    answered = [r for r in rows if r["status"] != "unmatched_request"]
    assert {r["status"] for r in answered} == {"ok"}, [r for r in answered if r["status"] != "ok"]
    assert len(answered) >= len(rows) - 1
    clients = {r["client_id"] for r in rows}
    assert {"ck-admin", "kp-admin"} <= clients
    if KCAT is not None:
        assert "kcat-cli" in clients
    for r in answered:
        assert r["request"] is not None and r["response"] is not None
        assert r["latency_ms"] is not None and r["latency_ms"] >= 0
        assert r["dst"].endswith(f":{live.port}")
    # without --kafka-port the port is learned from the traffic: same rows
    assert _decode_cli(live, tmp_path, "--no-progress") == rows


def test_matches_tshark_for_keys_it_dissects(live: Live, tmp_path: Path) -> None:
    rows = _decode_cli(live, tmp_path, "--kafka-port", str(live.port))
    # request headers: tshark reads them for every key
    ours: Counter[tuple[int, int, int, str]] = Counter(
        (r["api_key"], r["api_version"], r["correlation_id"], r["client_id"]) for r in rows
    )
    theirs = _tshark_requests(live)
    assert theirs, "tshark found no Kafka requests"
    assert ours == theirs
    assert {k[0] for k in ours} >= {3, 18}  # Metadata, ApiVersions
    # a response body tshark dissects (keys <= 47): ApiVersions' error code and API list, per stream
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(live.path), "-d", f"tcp.port=={live.port},kafka", "-Y",
         "kafka.response_key == 18", "-T", "fields", "-E", "separator=|", "-e", "tcp.stream",
         "-e", "kafka.correlation_id", "-e", "kafka.error", "-e", "kafka.api_versions.api_key"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    tshark_versions = {}
    for line in out.stdout.splitlines():
        stream, corr, error, keys = line.split("|")
        tshark_versions[(int(stream), int(corr))] = (int(error), [int(k) for k in keys.split(",")])
    ours_versions = {
        (r["connection_id"], r["correlation_id"]): (
            r["error_code"], [k["api_key"] for k in r["response"]["api_keys"]]
        )
        for r in rows
        if r["api_key"] == 18 and r["api_key"] <= TSHARK_MAX_KEY
    }
    assert ours_versions == tshark_versions


def test_matches_what_the_clients_received(live: Live, tmp_path: Path) -> None:
    rows = _decode_cli(live, tmp_path, "--kafka-port", str(live.port))
    by_client: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_client.setdefault(r["client_id"], []).append(r)
    # confluent-kafka: Metadata's cluster id and brokers
    ck = live.seen["ck-admin"]
    metas = [r for r in by_client["ck-admin"] if r["api_name"] == "Metadata" and r["status"] == "ok"]
    assert metas and all(r["response"]["cluster_id"] == ck["cluster_id"] for r in metas)
    assert sorted(b["node_id"] for b in metas[0]["response"]["brokers"]) == ck["brokers"]
    # kafka-python: DescribeCluster (key 60, beyond tshark) as the client saw it
    kp = live.seen["kp-admin"]
    described = [r for r in by_client["kp-admin"] if r["api_key"] == 60]
    assert len(described) == 1
    body = described[0]["response"]
    assert described[0]["api_name"] == "DescribeCluster"
    assert body["cluster_id"] == kp["cluster_id"]
    assert body["controller_id"] == kp["controller_id"]
    assert [b["broker_id"] for b in body["brokers"]] == [b["broker_id"] for b in kp["brokers"]]
    if "kcat-cli" in live.seen:
        kc = live.seen["kcat-cli"]
        metas = [r for r in by_client["kcat-cli"] if r["api_name"] == "Metadata" and r["status"] == "ok"]
        assert metas
        assert {b["node_id"] for b in metas[-1]["response"]["brokers"]} == {b["id"] for b in kc["brokers"]}


def test_spark_decodes_the_same_rows(live: Live, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("pandas")
    from pyspark.sql import SparkSession

    from kafkapy.capture.rows import decode_capture
    from kafkapy.spark import read_captures, write_captures

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    out = tmp_path / "rows"
    try:
        df = read_captures(spark, [str(live.path)], kafka_ports=[live.port])
        frame = [r.asDict() for r in df.collect()]
        write_captures(spark, [str(live.path)], out, kafka_ports=[live.port])
        written = [r.asDict() for r in spark.read.parquet(str(out)).collect()]
    finally:
        spark.stop()
    want = list(decode_capture(str(live.path), kafka_ports=[live.port]))

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["connection_id"], r["correlation_id"])

    for got in (frame, written):  # read_captures' DataFrame, then write_captures' Parquet
        assert len(got) == len(want) > 0
        for g, w in zip(sorted(got, key=key), sorted(want, key=key)):
            assert round(g["ts"].timestamp() * 1e6) == round(w["ts"] * 1e6)
            for col in ("api_key", "api_version", "correlation_id", "client_id", "request", "response",
                        "status", "request_bytes", "response_bytes", "error_code", "src", "dst"):  # fmt: skip
                assert g[col] == w[col], col


def test_fast_path_gives_the_events_of_the_layers(live: Live) -> None:
    """FrameReader's fused fast path against the layers composed by hand, on real loopback traffic."""
    from kafkapy.capture import ConnectionClassified, Frame, FrameReader, Unframed, read_packets
    from kafkapy.capture.frames import KafkaFramer
    from kafkapy.capture.packets import PacketDecoder
    from kafkapy.capture.tcp import TcpReassembler

    def key(e: Any) -> tuple[Any, ...]:
        if isinstance(e, Frame):
            return ("frame", e.conn.id, e.side, e.ts, e.end_ts, e.offset, e.size, e.body, e.reason)
        if isinstance(e, Unframed):
            return ("unframed", e.conn.id, e.side, e.ts, e.offset, e.length, e.reason)
        if isinstance(e, ConnectionClassified):
            return ("classified", e.conn.id, e.kafka, e.basis)
        return ("closed", e.conn.id, e.ts, e.reason)

    ports = {9092, live.port}
    shared = set(ports)  # one live set for both layers, as FrameReader keeps
    decoder, tcp, framer = PacketDecoder(), TcpReassembler(shared), KafkaFramer(shared)
    layered: list[Any] = []
    for packet in read_packets(live.path):
        seg = decoder.decode(packet)
        for event in tcp.feed(seg) if seg is not None else ():
            layered += framer.feed(event)
    for event in tcp.finish():
        layered += framer.feed(event)
    reader = FrameReader(live.path, kafka_ports=ports)
    assert [key(e) for e in reader] == [key(e) for e in layered]
    assert reader.fast_packets > reader.packet_count // 4
