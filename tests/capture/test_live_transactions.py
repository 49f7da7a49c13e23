"""Idempotent and transactional producers on the wire: confluent-kafka producers (a transaction
committed, one aborted, and an idempotent producer) and a read_committed consumer talk to the
embedded broker while dumpcap records; the decoded rows must carry each batch's producer id,
epoch and base sequence, its flags, and the COMMIT/ABORT markers, as tshark dissects them.

tshark 4.0 dissects Produce up to v8 and Fetch up to v11, so the broker serves Kafka 2.4's
ranges (those maxima; the test adds the release to kafkapy's table for the broker it starts).
Skipped, with the reason, when dumpcap/tshark are missing or capturing on ``lo`` is not
permitted.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_capture import TSHARK, capturing

from kafkapy.capture.rows import decode_capture
from kafkapy.embedded import Broker
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.releases import KAFKA_RELEASES, KafkaRelease
from kafkapy.protocol.versions import VersionRange

TOPIC = "txn-capture"

BatchKey = tuple[int, int, int, bool, bool, str]  # producer id, epoch, base sequence, txn, control, codec


def _release_2_4() -> KafkaRelease:
    """Kafka 2.8's ranges with Produce and Fetch at 2.4's maxima (v8, v11): what tshark 4.0 reads."""
    base = KAFKA_RELEASES["2.8"]
    advertised = dict(base.advertised)
    advertised[ApiKey.PRODUCE] = VersionRange(0, 8)
    advertised[ApiKey.FETCH] = VersionRange(0, 11)
    return KafkaRelease("2.4", advertised, base.refused)


def _produce(bootstrap: str) -> dict[str, Any]:
    """Run the producers and the consumer; what the consumer read."""
    import confluent_kafka
    import confluent_kafka.admin

    txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "ck-txn",
                                    "transactional.id": "capture-txn", "linger.ms": 5})  # fmt: skip
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(TOPIC, key=f"c{i}".encode(), value=b"committed", partition=0)
    txn.commit_transaction(30)
    txn.begin_transaction()
    for i in range(2):
        txn.produce(TOPIC, key=f"a{i}".encode(), value=b"aborted", partition=0)
    txn.flush(30)  # the records reach the log before the abort
    txn.abort_transaction(30)

    idem = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "ck-idem",
                                     "enable.idempotence": True, "compression.type": "lz4",
                                     "linger.ms": 5})  # fmt: skip
    for i in range(4):
        idem.produce(TOPIC, key=f"i{i}".encode(), value=b"idempotent " * 50, partition=0)
        idem.flush(30)  # a batch each: base sequences 0, 1, 2, 3
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "client.id": "ck-read",
                                         "group.id": "capture-readers", "auto.offset.reset": "earliest",
                                         "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe([TOPIC])
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(read) < 7 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            read.append(msg.key())
    consumer.close()
    return {"read": read}


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    pytest.importorskip("confluent_kafka")
    import confluent_kafka.admin

    path = tmp_path_factory.mktemp("txn") / "txn.pcapng"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(KAFKA_RELEASES, "2.4", _release_2_4())  # type: ignore[arg-type]
        with Broker({"kafka.version": "2.4"}) as broker:
            bootstrap = broker.bootstrap_servers
            port = int(bootstrap.rsplit(":", 1)[1])
            admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, 1, 1)]).values():
                future.result(30)
            with capturing(path, port):
                seen = _produce(bootstrap)
    yield path, port, seen


def _our_batches(path: Path, port: int) -> tuple[Counter[BatchKey], list[dict[str, Any]]]:
    """Batches (one key per batch, from its first record) of Produce requests and Fetch
    responses, and every record of them."""
    batches: Counter[BatchKey] = Counter()
    records: list[dict[str, Any]] = []
    for row in decode_capture(str(path), kafka_ports=[port]):
        if row["api_key"] == ApiKey.PRODUCE and row["request"]:
            parts = [p for t in json.loads(row["request"])["topic_data"] for p in t["partition_data"]]
        elif row["api_key"] == ApiKey.FETCH and row["response"]:
            parts = [p for t in json.loads(row["response"])["responses"] for p in t["partitions"]]
        else:
            continue
        for part in parts:
            seen_bases: set[int] = set()  # a batch: its records share a base offset in one partition
            for r in part["records"]:
                r["api"] = row["api_name"]
                records.append(r)
                b = r["batch"]
                if b["base_offset"] not in seen_bases:
                    seen_bases.add(b["base_offset"])
                    batches[(b["producer_id"], b["producer_epoch"], b["base_sequence"], b["transactional"],
                             b["control"], b["codec"])] += 1  # fmt: skip
    return batches, records


def _tshark_batches(path: Path, port: int) -> Counter[BatchKey]:
    """The same batches as tshark dissects them (Produce requests, Fetch responses)."""
    assert TSHARK is not None
    fields = ["kafka.batch_base_sequence", "kafka.batch_transactional", "kafka.batch_control_batch",
              "kafka.batch_codec", "kafka.producer_id", "kafka.producer_epoch",
              "kafka.first_offset"]  # fmt: skip
    out = subprocess.run(
        [TSHARK, "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", "kafka.batch_crc", "-T", "fields",
         "-E", "separator=|", *[a for f in fields for a in ("-e", f)]],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    found: Counter[BatchKey] = Counter()
    codecs = {"0": "none", "1": "gzip", "2": "snappy", "3": "lz4", "4": "zstd"}
    for line in out.stdout.splitlines():
        seqs, txns, controls, codec_ids, pids, epochs, aborted = (v.split(",") for v in line.split("|"))
        # A Fetch response's aborted transactions (producer id, first offset) come before the one
        # partition's records; the other producer ids and every epoch are the batches'.
        surplus = len(pids) - len(seqs)
        assert surplus == (len(aborted) if aborted != [""] else 0) and len(epochs) == len(seqs), line
        pids = pids[surplus:]
        for seq, txn, control, codec, pid, epoch in zip(seqs, txns, controls, codec_ids, pids, epochs):
            found[(int(pid), int(epoch), int(seq), txn in ("1", "True"), control in ("1", "True"),
                   codecs[codec])] += 1  # fmt: skip
    return found


def test_batches_match_tshark(capture: tuple[Path, int, dict[str, Any]]) -> None:
    path, port, seen = capture
    ours, records = _our_batches(path, port)
    theirs = _tshark_batches(path, port)
    assert ours == theirs
    # the producers as the rows show them: one transactional id's producer, one idempotent
    txn_pids = {k[0] for k in ours if k[3]}
    idem = sorted(k for k in ours if not k[3] and k[0] >= 0)
    assert len(txn_pids) == 1 and idem and {k[0] for k in idem}.isdisjoint(txn_pids)
    assert {k[2] for k in idem} == {0, 1, 2, 3} and {k[5] for k in idem} == {"lz4"}
    assert sorted(seen["read"]) == sorted([b"c0", b"c1", b"c2", b"i0", b"i1", b"i2", b"i3"])
    # the markers: one COMMIT and one ABORT, each shown in the Fetch responses that carried it
    markers = {(r["offset"], r["control"]["type"], r["control"]["coordinator_epoch"])
               for r in records if r["batch"]["control"]}  # fmt: skip
    assert [m[1] for m in sorted(markers)] == ["COMMIT", "ABORT"]
    assert all(r["control"] is None for r in records if not r["batch"]["control"])
    produced = [r for r in records if r["api"] == "Produce"]
    assert {base64.b64decode(r["value"]) for r in produced if r["batch"]["transactional"]} == {
        b"committed", b"aborted"}  # fmt: skip


def test_marker_bytes_match_tshark(capture: tuple[Path, int, dict[str, Any]]) -> None:
    """tshark 4.0 shows a control record's key and value as bytes; the decoded marker is what
    those bytes say (key: version, type; value: version, coordinator epoch)."""
    path, port, _ = capture
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", "kafka.batch_control_batch == 1",
         "-T", "fields", "-E", "separator=|", "-e", "kafka.message_key", "-e", "kafka.message_value"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    theirs = set()
    for line in out.stdout.splitlines():
        keys, values = line.split("|")
        for key, value in zip(keys.split(","), values.split(",")):
            raw_key, raw_value = bytes.fromhex(key.replace(":", "")), bytes.fromhex(value.replace(":", ""))
            if len(raw_key) != 4:  # the fields list every record of the packet: the data's keys are 2 bytes
                continue
            theirs.add((int.from_bytes(raw_key[2:4], "big", signed=True),
                        int.from_bytes(raw_value[2:6], "big", signed=True)))  # fmt: skip
    _, records = _our_batches(path, port)
    ours = {(r["control"]["type_id"], r["control"]["coordinator_epoch"]) for r in records if r["control"]}
    assert theirs and ours == theirs
    assert {t for t, _ in ours} == {0, 1}


def test_spark_gives_the_same_batches_and_markers(capture: tuple[Path, int, dict[str, Any]]) -> None:
    """read_captures and the decode_request UDF carry the same batch and control members as the
    local decoder, on the same capture."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pandas")
    import os

    from pyspark.sql import SparkSession

    from kafkapy.capture import Frame, FrameReader
    from kafkapy.spark import decode_request, read_captures

    path, port, _ = capture
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    frames = [(e.body,) for e in FrameReader(path)
              if isinstance(e, Frame) and e.from_client and not e.truncated]  # fmt: skip
    try:
        got = [r.asDict() for r in read_captures(spark, [str(path)], kafka_ports=[port]).collect()]
        df = spark.createDataFrame(frames, "request binary")
        udf_rows = df.select(decode_request("request").alias("r")).select("r.*").collect()
    finally:
        spark.stop()
    want = list(decode_capture(str(path), kafka_ports=[port]))

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["connection_id"], r["correlation_id"])

    assert len(got) == len(want) > 0
    for g, w in zip(sorted(got, key=key), sorted(want, key=key)):
        assert (g["request"], g["response"]) == (w["request"], w["response"])
    produce = ApiKey.PRODUCE
    local = {(w["client_id"], w["correlation_id"]): w["request"] for w in want if w["api_key"] == produce}
    udf = {(r["client_id"], r["correlation_id"]): r["body"] for r in udf_rows if r["api_key"] == produce}
    assert local and udf == local
    assert any('"transactional":true' in body for body in udf.values())
    assert any('"type":"COMMIT"' in (w["response"] or "") for w in want)
