"""KafkaJS (Node.js) against a kafkapy broker: a fifth real client, with its own, older versions of
most APIs (Produce v7, Fetch v11, JoinGroup v5, FindCoordinator v2...) and its own group
assignors. Each test runs one scenario of tests/interop/kafkajs_client.js in node and checks the
JSON it prints. `make install` puts KafkaJS under .venv/node (npm); without node or KafkaJS these
tests skip, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.testing import BrokerFactory

SCRIPT = Path(__file__).with_name("kafkajs_client.js")
NODE_MODULES = Path(__file__).resolve().parents[2] / ".venv" / "node" / "node_modules"
TIMEOUT_S = 60


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_MODULES / "kafkajs").is_dir():
        return f"KafkaJS is not installed under {NODE_MODULES} (make install runs npm for it)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def kafkajs(scenario: str, bootstrap: str, **options: Any) -> dict[str, Any]:
    """What the scenario printed; a failed scenario fails the test with node's one-line error."""
    done = subprocess.run(["node", str(SCRIPT), scenario, bootstrap, json.dumps(options)],
                          capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
    assert done.returncode == 0, done.stderr.strip()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("idempotent", [False, True])
def test_produced_records_come_back_whole(kafka_broker: Broker, idempotent: bool) -> None:
    seen = kafkajs("roundtrip", kafka_broker.bootstrap_servers, topic=f"kjs-rt-{idempotent}",
                   group=f"kjs-rt-{idempotent}", idempotent=idempotent)
    sent = seen["sent"]
    consumed = seen["consumed"]
    assert len(sent) == 44

    def content(record: dict[str, Any]) -> tuple[Any, ...]:
        return record["partition"], record["key"], record["value"], sorted(record["headers"].items())

    # Every record, nulls and headers included, in each partition's order, at offsets 0, 1, 2...
    for partition in range(3):
        mine = [r for r in consumed if r["partition"] == partition]
        assert [content(r) for r in mine] == [content(r) for r in sent if r["partition"] == partition]
        assert [r["offset"] for r in mine] == list(range(len(mine)))
    counts = {p: sum(r["partition"] == p for r in sent) for p in range(3)}
    assert sorted(seen["committed"]) == [[p, counts[p]] for p in range(3)]
    assert sorted(seen["ends"]) == [[p, counts[p], 0] for p in range(3)]


def test_two_consumers_share_the_partitions_then_one_owns_all(kafka_broker: Broker) -> None:
    seen = kafkajs("group", kafka_broker.bootstrap_servers, topic="kjs-group", group="kjs-group")
    assert sorted(seen["both"]["a"] + seen["both"]["b"]) == [0, 1, 2, 3]
    assert len(seen["both"]["a"]) == len(seen["both"]["b"]) == 2
    assert seen["alone"] == [0, 1, 2, 3]
    assert (seen["state"], seen["protocol"], seen["members"]) == ("Stable", "RoundRobinAssigner", 1)


def test_read_committed_skips_the_aborted_transaction(kafka_broker: Broker) -> None:
    seen = kafkajs("transactions", kafka_broker.bootstrap_servers, topic="kjs-txn", transactionalId="kjs-txn",
                   offsetsGroup="kjs-txn-offsets")
    assert seen["readCommitted"] == ["after-0", "committed-0", "committed-1"]
    assert seen["readUncommitted"] == ["aborted-0", "aborted-1", "after-0", "committed-0", "committed-1"]
    assert seen["sentOffsets"] == [[0, 1], [1, -1]]  # the offset sent in the committed transaction


def test_admin_calls(kafka_broker: Broker) -> None:
    seen = kafkajs("admin", kafka_broker.bootstrap_servers, topic="kjs-admin")
    assert seen["partitions"] == 3  # created with 1, then CreatePartitions to 3
    # AlterConfigs (not incremental) replaces the topic's whole set: retention.ms, set at creation,
    # is back at Kafka's default.
    assert seen["configs"] == {"cleanup.policy": "compact", "retention.ms": "604800000"}
    assert seen["byTime"] == [2]  # timestamps t, t+1s, t+2s, t+3s; the first at or after t+1.5s
    assert seen["afterDelete"] == [[2, 4]]  # DeleteRecords before offset 2, while policy was delete
    assert seen["refusedDelete"] == ["POLICY_VIOLATION"]  # compact alone keeps every record
    assert seen["brokers"] == 1
    assert seen["controller"] == kafka_broker.broker_id
    assert seen["topicListed"] is False


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" '
        'user_admin="a" user_alice="secret";')


def test_sasl_plain(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                   "sasl.enabled.mechanisms": "PLAIN",
                                   "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    plain = {"topic": "kjs-plain", "mechanism": "plain", "username": "alice"}
    assert kafkajs("sasl", broker.bootstrap_servers, **plain, password="secret") == {"values": ["over-sasl"]}
    refused = kafkajs("sasl", broker.bootstrap_servers, **plain, password="wrong", retries=0)
    assert refused["error"] == "KafkaJSSASLAuthenticationError"
    assert "Invalid username or password" in refused["message"]


@pytest.mark.parametrize(("mechanism", "iterations"), [("scram-sha-256", 4096), ("scram-sha-512", 8192)])
def test_sasl_scram(kafka_broker_factory: BrokerFactory, mechanism: str, iterations: int) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    broker = kafka_broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                                   "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    kind = ScramMechanism.SCRAM_SHA_256 if mechanism.endswith("256") else ScramMechanism.SCRAM_SHA_512
    admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
    upsert = UserScramCredentialUpsertion("kim", ScramCredentialInfo(kind, iterations), b"kim-pw")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        assert future.result(10) is None
    sasl = broker.listeners["SASL_PLAINTEXT"]
    assert kafkajs("sasl", sasl, topic="kjs-scram", mechanism=mechanism, username="kim",
                   password="kim-pw") == {"values": ["over-sasl"]}
    refused = kafkajs("sasl", sasl, topic="kjs-scram", mechanism=mechanism, username="kim", password="wrong",
                      retries=0)
    assert refused["error"] == "KafkaJSSASLAuthenticationError"


def test_acls_through_kafkajs_admin(kafka_broker_factory: BrokerFactory) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    broker = kafka_broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                   "sasl.enabled.mechanisms": "PLAIN",
                                   "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                                   "authorizer.class.name": "acl", "super.users": "User:admin"})
    seen = kafkajs("acls", broker.bootstrap_servers, topic="ord-kjs")
    assert seen["before"] == "TOPIC_AUTHORIZATION_FAILED"
    assert seen["after"] == "NONE"  # a PREFIXED WRITE on "ord" covers "ord-kjs"
    # resource type TOPIC (2), pattern PREFIXED (4), operation WRITE (4), ALLOW (3): Kafka's codes
    assert seen["described"] == [[2, "ord", 4, [["User:alice", "*", 4, 3]]]]
    assert seen["deleted"] == [[0, 1]]
    assert seen["afterDelete"] == "TOPIC_AUTHORIZATION_FAILED"


def test_admin_reassigns_a_partition() -> None:
    """KafkaJS's alterPartitionReassignments and listPartitionReassignments against three brokers
    (1, 2, 3) in one process: the partition moves from [1, 2] to [2, 3] at once (broker 2 leads,
    nothing is left ongoing), the producer follows it, and every record is read back."""
    with Broker({"broker.id": 1}, brokers=3) as cluster:
        seen = kafkajs("reassign", cluster.bootstrap_servers, topic="kjs-moved")
    assert seen["before"] == [{"partition": 0, "leader": 1, "replicas": [1, 2]}]
    assert seen["after"] == [{"partition": 0, "leader": 2, "replicas": [2, 3]}]
    assert seen["listedAll"] == [] and seen["listedNamed"] == []
    assert seen["refused"] == "INVALID_REPLICA_ASSIGNMENT"
    assert seen["values"] == [f"before-{i}" for i in range(5)] + [f"after-{i}" for i in range(5)]
