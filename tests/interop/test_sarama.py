"""Sarama, the Go client, against kafkapy: a client written apart from every other in the suite
(its own codecs, its own LZ4), and one that sends no ApiVersions, so it speaks exactly the
protocol it is configured for. At its default, Kafka 0.8.2's: Produce v0 with magic-0 messages,
Fetch v0, ListOffsets v0. Its consumer groups too.

The client (tests/interop/sarama_client.go) is built once per session, in GOPATH mode, against
Debian's golang-github-shopify-sarama-dev (Sarama 1.22), which ``make install`` installs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kafkapy.embedded import Broker

GO = shutil.which("go")
GOPATH = Path("/usr/share/gocode")  # Debian's Go sources
SARAMA_SOURCE = GOPATH / "src/github.com/Shopify/sarama"
SCRAM_SOURCE = GOPATH / "src/github.com/xdg-go/scram"
CLIENT_SOURCE = Path(__file__).with_name("sarama_client.go")
TIMEOUT_S = 60
COUNT = 5

pytestmark = pytest.mark.skipif(
    GO is None or not SARAMA_SOURCE.is_dir() or not SCRAM_SOURCE.is_dir(),
    reason="SARAMA NOT INSTALLED (`apt-get install golang-go golang-github-shopify-sarama-dev "
           "golang-github-xdg-go-scram-dev`, or `make install`)")


@pytest.fixture(scope="module")
def sarama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert GO is not None
    work = tmp_path_factory.mktemp("sarama")
    binary = work / "sarama_client"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOFLAGS": "",
           "GOCACHE": str(work / "go-build")}  # about 4 s from nothing, cgo (zstd) included
    built = subprocess.run([GO, "build", "-o", str(binary), str(CLIENT_SOURCE)], env=env, capture_output=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr.decode()[-2000:]
    return binary


def run(sarama: Path, mode: str, broker: Broker, topic: str, version: str, codec: str,
        count: int = COUNT, sasl: tuple[str, ...] | None = None, bootstrap: str | None = None) -> list[str]:
    """``sasl``: (user, password) for PLAIN, or (user, password, SCRAM mechanism)."""
    address = bootstrap or broker.bootstrap_servers
    done = subprocess.run([str(sarama), mode, address, topic, str(count), version, codec],
                          capture_output=True, timeout=TIMEOUT_S, env=_sasl_env(sasl))
    assert done.returncode == 0, f"sarama {mode} {version} {codec}: {done.stderr.decode()[-2000:]}"
    return done.stdout.decode().splitlines()


def _sasl_env(sasl: tuple[str, ...] | None) -> dict[str, str]:
    names = ("SARAMA_USER", "SARAMA_PASSWORD", "SARAMA_MECHANISM")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(zip(names, sasl or (), strict=False))
    return env


EXPECTED = [{"offset": i, "key": f"k{i}", "value": f"v{i}"} for i in range(COUNT)]


@pytest.mark.parametrize(("version", "codec"), [
    ("0.8.2.0", "none"), ("0.8.2.0", "gzip"), ("0.8.2.0", "snappy"),  # Sarama's default protocol
    ("0.10.0.0", "lz4"),  # magic 1 (LZ4 needs it)
    ("2.1.0", "lz4"), ("2.1.0", "gzip"),  # record batches
])
def test_sarama_produces_and_consumes(sarama: Path, version: str, codec: str) -> None:
    with Broker() as broker:
        assert run(sarama, "produce", broker, "t", version, codec) == [str(i) for i in range(COUNT)]
        assert [json.loads(line) for line in run(sarama, "consume", broker, "t", version, codec)] == EXPECTED


@pytest.mark.parametrize("version", ["0.10.0.0", "2.1.0"])
def test_sarama_reads_batches_kafkapy_compressed_with_lz4(sarama: Path, version: str) -> None:
    """A topic whose compression.type is lz4: kafkapy rebuilds uncompressed batches with LZ4, in
    frames Kafka's Java reader and Sarama accept (independent blocks; the LZ4 frame API's default,
    linked blocks, is refused by both: "lz4: block dependency not supported")."""
    with Broker({"compression.type": "lz4"}) as broker:
        assert run(sarama, "produce", broker, "t", version, "none") == [str(i) for i in range(COUNT)]
        assert [json.loads(line) for line in run(sarama, "consume", broker, "t", version, "none")] == EXPECTED


@pytest.mark.parametrize("version", ["0.10.2.0", "2.1.0"])
def test_a_sarama_consumer_group_reads_every_partition_and_commits(sarama: Path, version: str) -> None:
    """Sarama's ConsumerGroup (its own range assignor; JoinGroup v1, SyncGroup v0 and OffsetCommit
    v1 at either version, the last one Kafka 4 no longer serves) joins, reads the three partitions
    kafka-python filled, and commits what it read."""
    from kafka import KafkaProducer

    with Broker({"num.partitions": 3}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        for partition in range(3):
            for i in range(2):
                sent = producer.send("g", value=f"p{partition}-{i}".encode(), partition=partition)
                sent.get(timeout=TIMEOUT_S)
        producer.close(timeout=TIMEOUT_S)
        read = [json.loads(line) for line in run(sarama, "group", broker, "g", version, "none", count=6)]
        group = broker.group("sarama-group")
    assert sorted((r["partition"], r["offset"], r["value"]) for r in read) == [
        (p, i, f"p{p}-{i}") for p in range(3) for i in range(2)]
    assert sorted((o.topic, o.partition, o.offset) for o in group.offsets) == [("g", p, 2) for p in range(3)]
    assert group.state == "Empty"  # the member left on its way out


def test_sarama_idempotent_producer(sarama: Path) -> None:
    """InitProducerId v0 and sequence numbers from Sarama: the partition's producer state holds its
    producer id and the last sequence, as DescribeProducers would show it."""
    with Broker() as broker:
        assert run(sarama, "idempotent", broker, "t", "2.1.0", "gzip") == [str(i) for i in range(COUNT)]
        [state] = broker.producers("t", 0)
        assert [json.loads(line) for line in run(sarama, "consume", broker, "t", "2.1.0", "none")] == EXPECTED
    assert state.producer_id >= 0 and state.last_sequence == COUNT - 1


def test_sarama_cluster_admin(sarama: Path) -> None:
    """Sarama's ClusterAdmin: CreateTopics and a topic listing through Metadata and
    DescribeConfigs, and the ACL APIs at v0 (literal patterns, which Kafka 4 no longer serves)."""
    with Broker({"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}) as broker:
        steps = [json.loads(line)
                 for line in run(sarama, "admin", broker, "admin-t", "1.0.0", "none", count=3)]
    assert steps == [
        {"step": "topic", "partitions": 3},
        {"step": "acl", "resource": "admin-t", "principal": "User:alice"},
        {"step": "deleted", "count": 1},
    ]


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" '
        'user_alice="secret";')


@pytest.mark.parametrize("version", ["0.10.0.0", "1.0.0"], ids=["bare-token", "sasl-authenticate"])
def test_sarama_authenticates_with_sasl_plain(sarama: Path, version: str) -> None:
    """Below 1.0 Sarama sends SaslHandshake v0 and then the bare PLAIN token, as Kafka 0.10
    clients did; from 1.0 it wraps it in SaslAuthenticate. A wrong password is refused either way."""
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    with Broker(config) as broker:
        produced = run(sarama, "produce", broker, "t", version, "none", sasl=("alice", "secret"))
        assert produced == [str(i) for i in range(COUNT)]
        consumed = run(sarama, "consume", broker, "t", version, "none", sasl=("alice", "secret"))
        assert [json.loads(line) for line in consumed] == EXPECTED
        refused = subprocess.run([str(sarama), "produce", broker.bootstrap_servers, "t", "1", version,
                                  "none"], capture_output=True, timeout=TIMEOUT_S,
                                 env=_sasl_env(("alice", "wrong")))
    assert refused.returncode != 0


@pytest.mark.parametrize(("mechanism", "user", "password"), [("SCRAM-SHA-256", "sam", "sam-pw"),
                                                             ("SCRAM-SHA-512", "sue", "sue-pw")])
def test_sarama_authenticates_with_scram(sarama: Path, mechanism: str, user: str, password: str) -> None:
    """Credentials made with AlterUserScramCredentials (confluent-kafka's admin, on the plaintext
    listener), then Sarama's SCRAM exchange (xdg-go/scram) on the SASL listener."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}
    with Broker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], 4096)
        for future in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(user, info, password.encode())]).values():
            assert future.result(TIMEOUT_S) is None
        sasl = broker.listeners["SASL_PLAINTEXT"]
        produced = run(sarama, "produce", broker, "t", "1.0.0", "none", sasl=(user, password, mechanism),
                       bootstrap=sasl)
        assert produced == [str(i) for i in range(COUNT)]
        consumed = run(sarama, "consume", broker, "t", "1.0.0", "none", sasl=(user, password, mechanism),
                       bootstrap=sasl)
        assert [json.loads(line) for line in consumed] == EXPECTED
        refused = subprocess.run([str(sarama), "produce", sasl, "t", "1", "1.0.0", "none"],
                                 capture_output=True, timeout=TIMEOUT_S,
                                 env=_sasl_env((user, "wrong", mechanism)))
    assert refused.returncode != 0
