"""``kafkapy dump-log`` over the files a broker with ``log.dirs`` wrote for real clients: what it
prints of each batch and record is what the clients produced and the broker stored, in
DumpLogSegments' line shape; damaged files are reported in one line and the next file is still read."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkapy import Broker
from kafkapy.cli import main

Capture = pytest.CaptureFixture[str]
KEYED = 5  # records with keys and a header, then one tombstone, then one committed and one aborted txn


def _run(capsys: Capture, *args: str) -> tuple[int, list[str], str]:
    code = main(["dump-log", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _fields(line: str) -> dict[str, str]:
    """``name: value name: value ...`` as DumpLogSegments prints a batch or index line."""
    words = line.lstrip("| ").split(" ")
    found: dict[str, str] = {}
    key = None
    for word in words:
        if word.endswith(":") and key is None:
            key = word[:-1]
        elif key is not None:
            found[key] = word
            key = None
    return found


@pytest.fixture(scope="module")
def log_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("dump-log")
    with Broker({"log.dirs": str(root), "log.index.interval.bytes": 1}) as broker:
        bootstrap = broker.bootstrap_servers
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(KEYED):
            producer.produce("t", key=b"k%d" % i, value=b"v%d" % i, partition=0, headers=[("h", b"x")])
            producer.flush(10)
        producer.produce("t", key=b"gone", value=None, partition=0)
        producer.flush(10)
        transactional = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                                  "transactional.id": "tx-dump"})
        transactional.init_transactions(10)
        transactional.begin_transaction()
        transactional.produce("t", b"kept", partition=0)
        transactional.commit_transaction(10)
        transactional.begin_transaction()
        transactional.produce("t", b"dropped", partition=0)
        transactional.flush(10)  # written before the abort, so the abort needs a marker
        transactional.abort_transaction(10)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "dumpers",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["t"])
        read = 0
        while read < KEYED + 2:
            message = consumer.poll(10)
            assert message is not None
            if message.error() is None:
                read += 1
        consumer.commit(asynchronous=False)
        consumer.close()
    yield root  # the broker closed cleanly: indexes and the producer snapshot are on disk


def _segment(root: Path, partition_dir: str) -> Path:
    return root / partition_dir / "00000000000000000000.log"


def _written(root: Path, prefix: str) -> Path:
    """The one partition of an internal topic that holds records."""
    (found,) = [d for d in root.iterdir() if d.name.startswith(prefix)
                and (d / "00000000000000000000.log").stat().st_size > 0]
    return found


def test_batches_and_records_are_what_the_clients_wrote(log_dirs: Path, capsys: Capture) -> None:
    code, lines, err = _run(capsys, "--files", str(_segment(log_dirs, "t-0")), "--print-data-log")
    assert code == 0 and err == ""
    assert lines[:2] == [f"Dumping {_segment(log_dirs, 't-0')}", "Log starting offset: 0"]
    batches = [_fields(line) for line in lines[2:] if not line.startswith("|")]
    records = [line for line in lines[2:] if line.startswith("|")]
    # 5 keyed, the tombstone, a committed record, its COMMIT marker, an aborted record, its ABORT marker
    assert [b["baseOffset"] for b in batches] == [str(i) for i in range(KEYED + 5)]
    assert all(b["isvalid"] == "true" and b["magic"] == "2" and b["compresscodec"] == "none" for b in batches)
    positions = [int(b["position"]) for b in batches]
    sizes = [int(b["size"]) for b in batches]
    assert positions == [sum(sizes[:i]) for i in range(len(sizes))]
    assert positions[-1] + sizes[-1] == _segment(log_dirs, "t-0").stat().st_size
    assert records[0].endswith("keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h] key: k0 payload: v0")
    assert records[KEYED].endswith("keySize: 4 valueSize: -1 sequence: -1 headerKeys: [] key: gone")
    assert records[KEYED + 1].endswith("payload: kept") and " sequence: 0 " in records[KEYED + 1]
    assert records[KEYED + 2].endswith("endTxnMarker: COMMIT coordinatorEpoch: 0")
    assert records[KEYED + 3].endswith("payload: dropped")
    assert records[KEYED + 4].endswith("endTxnMarker: ABORT coordinatorEpoch: 0")
    committed = batches[KEYED + 1]
    assert (committed["isTransactional"], committed["isControl"], committed["producerId"]) == \
        ("true", "false", "0")
    assert batches[KEYED + 2]["isControl"] == "true"


def test_indexes_point_at_their_batches(log_dirs: Path, capsys: Capture) -> None:
    segment = _segment(log_dirs, "t-0")
    index, time_index = segment.with_suffix(".index"), segment.with_suffix(".timeindex")
    code, lines, err = _run(capsys, "--files", f"{index},{time_index}")
    assert code == 0 and err == ""  # no mismatch between an index and the segment
    offsets = [_fields(line) for line in lines if line.startswith("offset:")]
    times = [_fields(line) for line in lines if line.startswith("timestamp:")]
    # One entry per batch after the first (log.index.interval.bytes=1), as Kafka indexes them.
    assert [int(e["offset"]) for e in offsets] == list(range(1, KEYED + 5))
    assert times and all(int(e["offset"]) >= 1 for e in times)
    code, lines, _ = _run(capsys, "--files", str(segment.with_suffix(".index")), "--index-sanity-check")
    assert code == 0 and lines[-1] == f"{segment.with_suffix('.index')} passed sanity check."


def test_a_tampered_index_entry_is_reported(log_dirs: Path, tmp_path: Path,
                                           capsys: Capture) -> None:
    segment = _segment(log_dirs, "t-0")
    copy = tmp_path / segment.name
    copy.write_bytes(segment.read_bytes())
    index = bytearray(segment.with_suffix(".index").read_bytes())
    index[4:8] = (3).to_bytes(4, "big")  # the first entry now points inside a batch
    copy.with_suffix(".index").write_bytes(bytes(index))
    code, _, err = _run(capsys, "--files", str(copy.with_suffix(".index")), "--verify-index-only")
    assert code == 0
    assert err.splitlines() == [f"Mismatches in :{copy.with_suffix('.index').resolve()}",
                                "  Index offset: 1, log offset: -1"]


def test_producer_snapshot_and_aborted_transactions(log_dirs: Path, capsys: Capture) -> None:
    partition = log_dirs / "t-0"
    (snapshot,) = partition.glob("*.snapshot")
    code, lines, _ = _run(capsys, "--files", str(snapshot))
    assert code == 0
    (entry,) = [_fields(line) for line in lines[1:]]
    assert (entry["producerId"], entry["producerEpoch"], entry["currentTxnFirstOffset"]) == \
        ("0", "0", "Optional.empty")
    txn_indexes = list(partition.glob("*.txnindex"))
    assert txn_indexes, "an aborted transaction leaves a transaction index"
    code, lines, _ = _run(capsys, "--files", str(txn_indexes[0]))
    assert code == 0
    assert lines[1:] == [f"version: 0 producerId: 0 firstOffset: {KEYED + 3} lastOffset: {KEYED + 4} "
                         f"lastStableOffset: {KEYED + 5}"]


def test_the_coordinators_topics_decoded(log_dirs: Path, capsys: Capture) -> None:
    state = _segment(log_dirs, _written(log_dirs, "__transaction_state-").name)
    code, lines, _ = _run(capsys, "--files", str(state), "--transaction-log-decoder")
    assert code == 0
    values = [line.split(" payload: ")[1] for line in lines if line.startswith("|")]
    assert all(" key: transaction_metadata::transactionalId=tx-dump " in line for line in lines
               if line.startswith("|"))
    states = [value.split("state=")[1].split(",")[0] for value in values]
    assert states[0] == "Empty" and states[-2:] == ["PrepareAbort", "CompleteAbort"]
    assert "CompleteCommit" in states and "partitions=[t-0]" in values[1]
    # Stamped with the partition's leader epoch, as a leader's append stamps every batch.
    assert {_fields(line)["partitionLeaderEpoch"] for line in lines if line.startswith("baseOffset")} == {"0"}

    offsets = _segment(log_dirs, _written(log_dirs, "__consumer_offsets-").name)
    code, lines, _ = _run(capsys, "--files", str(offsets), "--offsets-decoder", "--skip-record-metadata")
    assert code == 0
    commits = [line for line in lines if '"type":"1"' in line]
    (commit,) = commits
    key, value = commit[len("| key: "):].split(" payload: ")
    assert json.loads(key) == {"type": "1", "data": {"group": "dumpers", "topic": "t", "partition": 0}}
    assert json.loads(value)["data"]["offset"] == KEYED + 2  # just past the last record it read ("kept")
    # The group's metadata: the member's subscription and assignment decoded, as Kafka's tool shows them.
    joined = [json.loads(line.split(" payload: ")[1]) for line in lines if '"type":"2"' in line]
    members = [m for value in joined for m in value["data"]["members"]]
    assert members, "the group's metadata record while the consumer was a member"
    assert members[0]["subscription"]["topics"] == ["t"]
    assert members[0]["assignment"]["assignedPartitions"] == [{"topic": "t", "partitions": [0]}]


def test_json_lines(log_dirs: Path, capsys: Capture) -> None:
    code, lines, _ = _run(capsys, "--files", str(_segment(log_dirs, "t-0")), "--deep-iteration", "--json")
    assert code == 0
    parsed = [json.loads(line) for line in lines]
    batches = [p for p in parsed if "baseOffset" in p]
    records = [p["record"] for p in parsed if "record" in p]
    assert len(batches) == len(records) == KEYED + 5
    assert batches[0]["deleteHorizonMs"] is None and batches[0]["isvalid"] is True
    assert records[0]["headerKeys"] == ["h"] and "payload" not in records[0]  # not --print-data-log


def test_a_torn_tail_and_a_broken_batch(log_dirs: Path, tmp_path: Path, capsys: Capture) -> None:
    whole = _segment(log_dirs, "t-0").read_bytes()
    torn = tmp_path / "00000000000000000000.log"
    torn.write_bytes(whole + whole[:30])  # a batch cut short, as a crash leaves one
    broken_dir = tmp_path / "b"
    broken_dir.mkdir()
    broken = broken_dir / "00000000000000000000.log"
    damaged = bytearray(whole)
    damaged[76 + 16] = 7  # the second batch's magic byte
    broken.write_bytes(bytes(damaged))
    code, lines, err = _run(capsys, "--files", f"{broken},{torn},{tmp_path / 'notes.txt'}")
    assert code == 1
    assert err.splitlines()[0].startswith(f"kafkapy dump-log: {broken}: cannot read the batch at position 76")
    assert "Traceback" not in err and f"Ignoring unknown file {tmp_path / 'notes.txt'}" in err
    # The file after the broken one is still read, torn tail and all.
    assert "Found 30 invalid bytes at the end of 00000000000000000000.log" in lines
    assert sum(1 for line in lines if line.startswith("baseOffset: 0 ")) == 2


def test_missing_file_and_bad_name(tmp_path: Path, capsys: Capture) -> None:
    code, _, err = _run(capsys, "--files", str(tmp_path / "00000000000000000000.log"))
    assert code == 1 and "No such file or directory" in err and err.count("\n") == 1
    odd = tmp_path / "segment.log"
    odd.write_bytes(b"")
    code, _, err = _run(capsys, "--files", str(odd))
    assert code == 1 and "not named by its base offset" in err


def test_the_executable(log_dirs: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kafkapy.cli", "dump-log", "--files",
                             str(_segment(log_dirs, "t-0"))], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sum(1 for line in result.stdout.splitlines() if line.startswith("baseOffset:")) == KEYED + 5


def test_every_file_of_a_partition_directory_at_once(log_dirs: Path, capsys: Capture) -> None:
    """A glob of the whole directory (partition.metadata, leader-epoch-checkpoint among the files)
    dumps what DumpLogSegments dumps and, as it does, ignores the rest with one line each."""
    files = sorted((log_dirs / "t-0").iterdir())
    assert log_dirs / "t-0" / "partition.metadata" in files
    code, lines, err = _run(capsys, "--files", ",".join(str(f) for f in files))
    assert code == 0 and "Traceback" not in err
    assert f"Ignoring unknown file {log_dirs / 't-0' / 'partition.metadata'}" in err.splitlines()
    assert any(line.startswith("baseOffset: 0 ") for line in lines)
