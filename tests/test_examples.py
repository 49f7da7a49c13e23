"""Every example in examples/ runs, and says what it should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkapy.protocol import encode_request, encode_response

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # The checkout under test first: a script's own directory, not the cwd, heads its sys.path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(EXAMPLES.parent), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_decode_frame_request_with_size_prefix() -> None:
    frame = encode_request(3, 12, 7, "example", {"topics": [{"name": "orders"}]})
    framed = (len(frame)).to_bytes(4, "big") + frame
    result = run(str(EXAMPLES / "decode_frame.py"), framed.hex())
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["api"] == "Metadata" and out["correlation_id"] == 7 and out["client_id"] == "example"
    assert out["body"]["topics"][0]["name"] == "orders"


def test_decode_frame_response() -> None:
    frame = encode_response(18, 3, 9, {"error_code": 0, "api_keys": [
        {"api_key": 0, "min_version": 3, "max_version": 11}]})
    result = run(str(EXAMPLES / "decode_frame.py"), "--response", "18", "3", frame.hex())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["body"]["api_keys"][0]["max_version"] == 11


def test_decode_frame_reports_bad_input() -> None:
    result = run(str(EXAMPLES / "decode_frame.py"), "0003000c00000007")
    assert result.returncode == 1 and "cannot decode" in result.stderr and "Metadata" in result.stderr


def test_decode_frame_docstring_samples_work_as_pasted() -> None:
    """Every command line in the example's docstring, run as written."""
    doc = (EXAMPLES / "decode_frame.py").read_text().split('"""')[1]
    commands = [line.split()[1:] for line in doc.splitlines() if line.strip().startswith("python ")]
    outs = []
    for command in commands:
        result = run(str(EXAMPLES.parent / command[0]), *command[1:])
        assert result.returncode == 0, (command, result.stderr)
        outs.append(json.loads(result.stdout))
    assert [(o["api"], o["api_version"], o["correlation_id"]) for o in outs] == [
        ("ApiVersions", 3, 7), ("ApiVersions", 3, 7), ("Metadata", 1, 1)]
    assert outs[0]["body"]["client_software_name"] == "kcat" and outs[0]["client_id"] == "demo"
    assert outs[1]["body"]["api_keys"] == [{"api_key": 3, "min_version": 0, "max_version": 12}]
    assert outs[2]["body"]["topics"][0]["name"] == "orders"


@pytest.mark.parametrize("text", ["00120003000000070002...", "zz", "123"])
def test_decode_frame_non_hex_is_one_line(text: str) -> None:
    result = run(str(EXAMPLES / "decode_frame.py"), text)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("decode_frame.py: error: the frame is not hex: ")


def test_cli_demo_runs() -> None:
    result = run("-m", "kafkapy.cli", "demo")
    assert result.returncode == 0, result.stderr
    assert "ApiVersions v3 response" in result.stdout and "APIs in the catalogue" in result.stdout


def test_embedded_broker_describes_the_cluster() -> None:
    result = run(str(EXAMPLES / "embedded_broker.py"))
    assert result.returncode == 0, result.stderr
    first, _, rest = result.stdout.partition("\n")
    assert first.startswith("broker 1 listening on {'PLAINTEXT': '127.0.0.1:")
    out = json.loads(rest)
    (broker,) = out["cluster"]["brokers"]
    assert (broker["broker_id"], broker["host"], broker["rack"]) == (1, "127.0.0.1", "rack-a")
    assert out["cluster"]["controller_id"] == 1 and out["cluster"]["cluster_id"]
    assert out["api_versions"]["DescribeCluster"] == [0, 2]


def test_coordinated_consumer_example_rebalances() -> None:
    result = run(str(EXAMPLES / "coordinated_consumer.py"))
    assert result.returncode == 0, result.stderr
    steps = [json.loads(line) for line in result.stdout.splitlines()]
    assert steps == [
        {"step": "alpha alone", "assignment": {"alpha": [0, 1, 2, 3]}},
        {"step": "alpha and beta", "assignment": {"alpha": [0, 1], "beta": [2, 3]}},
        {"step": "beta left", "assignment": {"alpha": [0, 1, 2, 3]}},
    ]


def test_sasl_plain_example() -> None:
    result = run(str(EXAMPLES / "sasl_plain.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["alice"] == {"unsent": 0, "consumed": "hello, authenticated world"}
    assert "SASL authentication error: Authentication failed: Invalid username or password" in \
        out["mallory"]["authentication_error"]


def test_sasl_oauthbearer_example() -> None:
    result = run(str(EXAMPLES / "sasl_oauthbearer.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    alice = out["alice"]
    assert alice["unsent"] == 0 and alice["consumed"] == alice["produced"] > 0
    (authentications,) = alice["authentications_per_connection"]  # one connection, re-authenticated
    assert authentications >= 2
    assert 'SASL authentication error: {"status":"insufficient_scope", "scope":"[kafka]"}' in \
        out["mallory"]["authentication_error"]


def test_sasl_oidc_example() -> None:
    result = run(str(EXAMPLES / "sasl_oidc.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["orders-service"] == {"produced": 3, "unsent": 0, "broker_saw": ["User:orders-service"]}
    assert 'SASL authentication error: {"status":"invalid_token"}' in out["mallory"]["authentication_error"]
    assert "JWS signature check failed" in result.stderr  # the broker's log says why (WARN, as Kafka's)


def test_sasl_scram_example() -> None:
    result = run(str(EXAMPLES / "sasl_scram.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["credentials"] == {"alice": [["SCRAM_SHA_256", 4096]], "bob": [["SCRAM_SHA_512", 8192]]}
    assert out["alice SCRAM-SHA-256"] == out["bob SCRAM-SHA-512"] == {"delivered": True,
                                                                     "authentication_error": None}
    assert out["bob wrong password"]["delivered"] is False
    refusal = out["bob wrong password"]["authentication_error"]
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in refusal


def test_topic_configs_example() -> None:
    result = run(str(EXAMPLES / "topic_configs.py"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "described": {"cleanup.policy": ["compact", "DYNAMIC_TOPIC_CONFIG"],
                      "max.message.bytes": ["65536", "DYNAMIC_TOPIC_CONFIG"],
                      "retention.ms": ["172800000", "DEFAULT_CONFIG"]},
        "log_config": {"compacts": True, "max_message_bytes": 65536, "retention_ms": 172_800_000},
    }


def test_fault_injection_example_delivers_exactly_once() -> None:
    result = run(str(EXAMPLES / "fault_injection.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["undelivered"] == 0 and out["fault_fired"] == 2
    answers = out["produce_answers"]
    assert answers[:2] == ["NOT_LEADER_OR_FOLLOWER"] * 2 and answers[-1] == "NONE"
    assert out["stored"] == [[i, f"order-{i}", i] for i in range(5)]


def test_exactly_once_faults_example_commits_across_coordinator_moves() -> None:
    result = run(str(EXAMPLES / "exactly_once_faults.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    [txn_topic, txn_partition, txn_from, txn_to], [group_topic, group_partition, group_from, group_to] = \
        out["moved"]
    assert (txn_topic, group_topic) == ("__transaction_state", "__consumer_offsets")
    assert [txn_partition, group_partition] == out["state_partitions"]
    assert txn_from != txn_to and group_from != group_to and out["coordinators_after"] == [txn_to, group_to]
    assert out["end_txn_failed"] == 1
    assert out["open"] == [4, 5] and out["committed"] == [6, 6]  # two markers before; one record open
    assert out["invoices"] == [f"invoice for order-{n}" for n in range(3)] and out["group_offset"] == 3


def test_seeded_cluster_example_spreads_reads_moves_and_resets() -> None:
    result = run(str(EXAMPLES / "seeded_cluster.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["brokers"] == [0, 1, 2] and sorted(out["leaders"]) == [0, 1, 2]
    assert 1 not in out["leaders_with_broker_1_down"]
    assert out["records"] == [[i % 3, f"order-{i}"] for i in sorted(range(6), key=lambda i: (i % 3, i))]
    assert out["topics_after_reset"] == []


def test_rack_aware_consumer_example_reads_from_its_racks_follower() -> None:
    result = run(str(EXAMPLES / "rack_aware_consumer.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["racks"] == {"0": "az0", "1": "az1", "2": "az2"}
    assert out["read"] == [f"event-{i}" for i in range(5)]
    served = out["fetches_served"]
    assert served["2"] >= 1 and served["1"] == 0  # the follower in az2 served it, az1's never


def test_old_protocol_client_example_speaks_produce_and_fetch_v2() -> None:
    result = run(str(EXAMPLES / "old_protocol_client.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["read"] == [[i, f"k{i}", f"v{i}", 1_700_000_000_000 + i] for i in range(3)]
    assert out["versions"] == ["Fetch v2", "Produce v2"]


def test_client_telemetry_example() -> None:
    result = run(str(EXAMPLES / "client_telemetry.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["unsent"] == 0 and out["pushes"] >= 1 and out["compression"] == "zstd"
    assert "org.apache.kafka.producer.record.queue.time.avg" in out["metrics"]
    assert all(name.startswith("org.apache.kafka.producer.") for name in out["metrics"])


def test_acls_example() -> None:
    result = run(str(EXAMPLES / "acls.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out == {"alice_before": "TOPIC_AUTHORIZATION_FAILED", "alice_after": "NONE",
                   "acls": ["TOPIC orders. PREFIXED User:alice WRITE ALLOW"]}


def test_log_dir_move_moves_a_partition_between_log_dirs_while_producing() -> None:
    result = run(str(EXAMPLES / "log_dir_move.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["before"] in ({"disk1": ["jbod-0"], "disk2": []}, {"disk1": [], "disk2": ["jbod-0"]})
    assert out["after"] == {name: [] if found else ["jbod-0"] for name, found in out["before"].items()}
    assert (out["errors"], out["read"], out["in_order"]) == (["NoError"], 1000, True)


def test_partition_reassignment_moves_replicas_and_keeps_the_records() -> None:
    result = run(str(EXAMPLES / "partition_reassignment.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["before"] == {"replicas": [1, 2], "leader": 1, "leader_epoch": 0}
    assert out["after"] == {"replicas": [2, 3], "leader": 2, "leader_epoch": 1}
    assert (out["refused"], out["ongoing"]) == ({}, 0)
    assert out["read"] == [f"before-{i}" for i in range(5)] + [f"after-{i}" for i in range(5)]


def test_exactly_once_example_hides_the_aborted_batch_from_read_committed() -> None:
    result = run(str(EXAMPLES / "exactly_once.py"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    invoices = [f"invoice for order-{n}" for n in range(6)]
    assert out["read_committed"] == invoices  # each order invoiced once, in order
    assert sorted(out["read_uncommitted"]) == sorted(invoices + invoices[2:4])
    assert out["only_read_uncommitted"] == invoices[2:4]  # the aborted batch, then redone


def test_capture_and_decode_example_finds_the_produced_records_in_the_pcap() -> None:
    result = run(str(EXAMPLES / "capture_and_decode.py"))
    assert result.returncode == 0, result.stderr
    *rows, summary_line = result.stdout.splitlines()
    summary = json.loads(summary_line)
    assert summary["produced"] == [[f"customer-{n}", f"paid {10 * (n + 1)}"] for n in range(3)]
    assert {"ApiVersions", "Metadata", "Produce", "Fetch"} <= set(summary["by_api"])
    assert summary["exchanges"] == len(rows) and summary["statuses"]["ok"] >= 5
    # A request the client dropped its connection on (librdkafka does on close) is the only
    # other status a clean run can show.
    assert set(summary["statuses"]) <= {"ok", "unmatched_request"}


@pytest.mark.slow
def test_spark_traffic_report_example_agrees_with_the_local_decoder() -> None:
    from kafkapy.capture.rows import decode_capture

    result = run(str(EXAMPLES / "spark_traffic_report.py"), timeout=300)  # a JVM of its own
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    captures = sorted((EXAMPLES.parent / "tests" / "data" / "captures").glob("*.pcap"))
    rows = [row for capture in captures for row in decode_capture(capture)]
    named = [row for row in rows if row["api_name"] is not None]
    assert report["captures"] == len(captures)
    assert {api: counts["exchanges"] for api, counts in report["by_api"].items()} == {
        api: sum(1 for row in named if row["api_name"] == api) for api in {row["api_name"] for row in named}}
    assert {api: counts["errors"] for api, counts in report["by_api"].items()} == {
        api: sum(1 for row in named if row["api_name"] == api and (row["error_code"] or 0) > 0)
        for api in {row["api_name"] for row in named}}
    assert report["topics_written"] == sorted(
        {topic for row in named if row["api_name"] == "Produce" for topic in row["topics"] or []})


def test_logging_proxy_carries_a_producer_and_a_consumer() -> None:
    result = run(str(EXAMPLES / "logging_proxy.py"), timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout[result.stdout.index("\n{") + 1:])
    assert summary["consumed"] == {"key": "k", "value": "through the proxy"}
    assert {"ApiVersions", "Metadata", "Produce", "ListOffsets", "Fetch"} <= set(summary["requests"])
    assert "Produce v" in result.stdout and "(upstream " in result.stdout
    assert "Traceback" not in result.stderr and "destroyed" not in result.stderr
