"""``kafkapy serve --brokers 3 --seed FILE`` as a real process: kcat sees three brokers and reads
the seeded records; a bad seed file is one error line and exit 2, before anything listens."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from quick_clients import KCAT_CONSUMER
from serve_in_process import serve_in_process

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
SERVING = re.compile(r"serving (\d+) broker\(s\), bootstrap servers (\S+)")


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kafkapy.cli", "serve", *args], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_serve_runs_a_seeded_three_broker_cluster(tmp_path: Path) -> None:
    assert KCAT is not None
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"greetings": {"partitions": 2, "records": [
        {"key": "a", "value": "hello", "headers": {"h": "1"}, "partition": 0, "timestamp": 1700000000000},
        {"key": "b", "value": "world", "partition": 1, "timestamp": 1700000000001}]}}))
    proc = serve("--brokers", "3", "--seed", str(seed), "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    try:
        assert proc.stderr is not None
        deadline, lines = time.monotonic() + 30, []
        found = None
        while found is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            found = SERVING.search(line)
        assert found is not None, "".join(lines)
        count, bootstrap = int(found.group(1)), found.group(2)
        assert count == 3 and len(bootstrap.split(",")) == 3
        listing = subprocess.run([KCAT, "-b", bootstrap, "-L", "-J"], capture_output=True, text=True,
                                 timeout=60, check=True).stdout
        metadata = json.loads(listing)
        assert sorted(b["id"] for b in metadata["brokers"]) == [0, 1, 2]
        [topic] = [t for t in metadata["topics"] if t["topic"] == "greetings"]
        assert len({p["leader"] for p in topic["partitions"]}) == 2  # spread: a leader each
        out = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", "greetings", "-e", "-q", *KCAT_CONSUMER,
                              "-f", "%p %o %k=%s %h %T\\n"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
        assert sorted(out.splitlines()) == ["0 0 a=hello h=1 1700000000000", "1 0 b=world  1700000000001"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)  # and its stderr pipe closed
        assert proc.returncode == 0
    assert "Traceback" not in rest


BAD_SEEDS = [
    ("{oops", "not valid JSON"),
    ('{"t": {"partitions": 0}}', "topic 't' partitions: expected an integer of at least 1"),
]


def test_a_bad_seed_file_is_one_error_line_from_the_real_process(tmp_path: Path) -> None:
    content, message = BAD_SEEDS[0]
    seed = tmp_path / "seed.json"
    seed.write_text(content)
    proc = serve("--brokers", "2", "--seed", str(seed), "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert message in err and "Traceback" not in err and "listening on" not in err


@pytest.mark.parametrize(("content", "message"), BAD_SEEDS)
def test_a_bad_seed_file_is_one_error_line(tmp_path: Path, content: str, message: str) -> None:
    """In this process (the real process's output is proven above, for the first of these)."""
    seed = tmp_path / "seed.json"
    seed.write_text(content)
    code, err = serve_in_process("--brokers", "2", "--seed", str(seed),
                                 "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    assert code == 2
    assert message in err and "Traceback" not in err and "listening on" not in err


def test_brokers_must_be_positive() -> None:
    code, err = serve_in_process("--brokers", "0")
    assert code == 2 and "--brokers must be at least 1" in err


def test_racks_are_one_per_broker() -> None:
    code, err = serve_in_process("--brokers", "3", "--racks", "a,b")
    assert code == 2 and "--racks names 2 racks for 3 broker(s)" in err


def test_serve_gives_each_broker_its_rack() -> None:
    from kafkapy.client import SimpleClient
    from kafkapy.protocol.api_keys import ApiKey

    proc = serve("--brokers", "3", "--racks", "az0,az1,az2",
                 "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    try:
        assert proc.stderr is not None
        deadline, found = time.monotonic() + 30, None
        while found is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            found = SERVING.search(line)
        assert found is not None
        with SimpleClient(found.group(2)) as client:
            brokers = client.request(ApiKey.METADATA, 12, {"topics": []})["brokers"]
        assert {b["node_id"]: b["rack"] for b in brokers} == {0: "az0", 1: "az1", 2: "az2"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
