"""The error paths of the ``kafkapy`` commands: what each says and its exit status when a group,
topic or value is wrong, checked against what Kafka's own tools do (docs/cli.md, "Errors and exit
codes"). The CLI runs as a process (PYTHONPATH set to this tree, so a worktree tests its own code)
against an embedded broker, and in-process for the sweeps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkapy import Broker

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "orders"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``kafkapy`` command, importing this tree's code."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kafkapy.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        running.seed({TOPIC: {"partitions": 2, "records": [{"value": "v"} for _ in range(4)]}})
        yield running


def _commit(broker: Broker, group: str, offset: int) -> None:
    """A classic group with a committed offset and no member (Empty), made by confluent-kafka."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _join_and_leave(broker: Broker, group: str) -> None:
    """A classic group a consumer joined and left without committing: Empty, without offsets."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the consumer never joined"
    finally:
        consumer.close()


# --- groups --describe of a group that does not exist --------------------------------------

@pytest.mark.parametrize("view", [(), ("--members",), ("--state",), ("--offsets",)])
def test_describing_a_group_that_does_not_exist_fails(broker: Broker, view: tuple[str, ...]) -> None:
    """kafka-consumer-groups.sh says "Consumer group 'G' does not exist." of a Dead group (and
    fails with GroupIdNotFoundException on a Kafka 4 broker); kafkapy says it on stderr and exits 1,
    as kafka-share-groups.sh and kafkapy share-groups do for theirs (it exited 0)."""
    described = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--group",
                    "ghost", *view)
    assert (described.returncode, described.stdout, described.stderr) == (
        1, "", "Error: Consumer group 'ghost' does not exist.\n")


def test_the_other_groups_are_still_described(broker: Broker) -> None:
    """One missing group of several: the others' rows are printed, then the command fails."""
    _commit(broker, "kept", 1)
    described = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--describe",
                    "--group", "ghost", "--group", "kept", "--json")
    assert described.returncode == 1
    assert described.stderr.splitlines() == ["Consumer group 'kept' has no active members.",
                                             "Error: Consumer group 'ghost' does not exist."] or \
        described.stderr.splitlines() == ["Error: Consumer group 'ghost' does not exist.",
                                          "Consumer group 'kept' has no active members."]
    assert '"group": "kept", "topic": "orders", "partition": 0, "current_offset": 1' in described.stdout


def test_an_empty_group_without_offsets_prints_no_table(broker: Broker) -> None:
    """As Kafka's tool: an Empty group is "no active members" (exit 0), and with no row to show
    no header either (kafkapy printed a lone header line)."""
    _join_and_leave(broker, "drifted")
    described = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--group",
                    "drifted")
    assert (described.returncode, described.stdout, described.stderr) == (
        0, "", "Consumer group 'drifted' has no active members.\n")


def test_share_groups_and_groups_agree_on_a_missing_group(broker: Broker) -> None:
    shared = cli("share-groups", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--group",
                 "ghost")
    assert (shared.returncode, shared.stderr) == (1, "Error: Share group 'ghost' does not exist.\n")


def test_configs_of_a_missing_topic_name_the_error_only(broker: Broker) -> None:
    """Kafka's DescribeConfigs answers an unknown topic with UNKNOWN_TOPIC_OR_PARTITION and no
    message; kafkapy printed the missing message as 'None'."""
    refused = cli("configs", "--bootstrap-server", broker.bootstrap_servers, "--describe",
                  "--entity-type", "topics", "--entity-name", "ghost")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "kafkapy configs: error UNKNOWN_TOPIC_OR_PARTITION\n")
