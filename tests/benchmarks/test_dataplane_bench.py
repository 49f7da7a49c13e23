"""`python -m benchmarks dataplane --quick` runs and measures both kafkapy and the mock: numbers, never
a crash or a made-up number, committed transactions/s and the interceptor chain's cost included."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from benchmarks.dataplane import CHAIN_VARIANTS, NO_RULE, serves_records
from kafkapy.embedded import Broker

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"^[\d,]+(\.\d+)?$")


def test_quick_run_reports_both_brokers() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "dataplane", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 4 and cells[0].startswith(("produce", "consume", "RSS", "committed", "broker")):
            rows[cells[0]] = cells
    assert len(rows) == 7, result.stdout
    assert "broker process CPU us per one-at-a-time produce" in rows
    for label, cells in rows.items():
        if label.startswith("RSS"):
            assert cells[2] == "n/a (keeps ~5 MB)"
        else:
            assert NUMBER.match(cells[2]), f"mock {label}: {cells[2]}"
        assert NUMBER.match(cells[1]), f"kafkapy {label}: {cells[1]}"
        assert cells[3].endswith("x") or label.startswith("RSS")
    assert "error:" not in result.stdout
    # The interceptor chain's cost: each rule variant measured, with its ratio to no rule.
    chain = {}
    for line in result.stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] in CHAIN_VARIANTS:
            chain[cells[0]] = cells
    assert set(chain) == set(CHAIN_VARIANTS), result.stdout
    for variant, cells in chain.items():
        assert NUMBER.match(cells[1]) and NUMBER.match(cells[3]), f"{variant}: {cells}"
        assert cells[2].endswith("x") and cells[4].endswith("x"), f"{variant}: {cells}"
    assert chain[NO_RULE][2] == chain[NO_RULE][4] == "1.00x"


def test_serves_records_reads_api_versions() -> None:
    import confluent_kafka

    owner = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 0})
    (mock,) = owner.list_topics(timeout=10).brokers.values()
    assert serves_records(f"{mock.host}:{mock.port}")
    with Broker({}) as broker:
        assert serves_records(broker.bootstrap_servers)
