"""Real clients on a SASL_PLAINTEXT listener with PLAIN: confluent-kafka (librdkafka), kafka-python
and kcat authenticate, produce and consume; a wrong password gets each client's own authentication
error, and the broker keeps serving the others."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from typing import Any

import pytest
import round_trips

from kafkapy.embedded import Broker
from kafkapy.testing import BrokerFactory

TIMEOUT_S = 10
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" '
        'user_admin="a" user_alice="secret";')
SASL_BROKER = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
               "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}


@pytest.fixture
def sasl_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory(SASL_BROKER)


# --- confluent-kafka --------------------------------------------------------------------------

def confluent(broker: Broker, user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}


def confluent_round_trip(broker: Broker, topic: str) -> list[bytes]:
    group = {"group.id": "sasl-group"}
    return round_trips.confluent_round_trip(confluent(broker, "alice", "secret"),
                                            confluent(broker, "alice", "secret", **group), topic)


def test_confluent_kafka_produces_and_consumes_with_plain(sasl_broker: Broker) -> None:
    assert confluent_round_trip(sasl_broker, "sasl-orders") == [b"one", b"two"]


def test_confluent_kafka_wrong_password_is_an_authentication_error(sasl_broker: Broker) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer(confluent(sasl_broker, "alice", "wrong", error_cb=errors.append,
                                  **{"reconnect.backoff.ms": 1000}))
    producer.produce("sasl-refused", b"x")
    producer.flush(3)
    authentication = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert authentication, errors
    assert "Authentication failed: Invalid username or password" in authentication[0].str()
    # The broker keeps serving the others.
    assert confluent_round_trip(sasl_broker, "sasl-after-refusal") == [b"one", b"two"]


# --- kafka-python -----------------------------------------------------------------------------

def kafka_python(bootstrap: str, user: str, password: str, mechanism: str = "PLAIN") -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password,
            "request_timeout_ms": TIMEOUT_S * 1000}


def test_kafka_python_produces_and_consumes_with_plain(sasl_broker: Broker) -> None:
    config = kafka_python(sasl_broker.bootstrap_servers, "alice", "secret")
    assert round_trips.kafka_python_round_trip(config, "kp-sasl", b"hello") == b"hello"


def test_kafka_python_wrong_password_is_an_authentication_error(
        sasl_broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python 3 reads the SaslAuthenticate answer and logs SaslAuthenticationFailedError with
    the broker's message; it then retries until its bootstrap timeout, which is what the call raises."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError

    refused = kafka_python(sasl_broker.bootstrap_servers, "alice", "wrong")
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaAdminClient(bootstrap_timeout_ms=2000, **refused)
    reported = [r.getMessage() for r in caplog.records if r.name.startswith("kafka.")]
    refusal = "Authentication failed: Invalid username or password"
    assert any("SaslAuthenticationFailedError" in m and refusal in m for m in reported), reported
    # The broker still serves a client with the right password.
    admin = KafkaAdminClient(**kafka_python(sasl_broker.bootstrap_servers, "admin", "a"))
    try:
        assert admin.describe_cluster()["brokers"]
    finally:
        admin.close()


# --- kcat -------------------------------------------------------------------------------------

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED: kcat SASL interop test SKIPPED")
def test_kcat_lists_metadata_over_sasl_plain(sasl_broker: Broker) -> None:
    assert KCAT is not None

    def listing(password: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KCAT, "-L", "-J", "-b", sasl_broker.bootstrap_servers, "-m", "5",
                               "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
                               "-X", "sasl.username=alice", "-X", f"sasl.password={password}"],
                              capture_output=True, text=True, timeout=TIMEOUT_S * 3)

    result = listing("secret")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["brokers"] == [{"id": sasl_broker.broker_id,
                                                     "name": sasl_broker.bootstrap_servers}]
    refused = listing("wrong")
    assert refused.returncode != 0
    assert "Authentication failed: Invalid username or password" in refused.stderr


# --- SCRAM: credentials set with AlterUserScramCredentials, then used to log in ------------------

SCRAM_BROKER = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


@pytest.fixture
def scram_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    broker = kafka_broker_factory(SCRAM_BROKER)
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("sam", sha256, b"sam-pw"),
                                                  UserScramCredentialUpsertion("sue", sha512, b"sue-pw")])
    for future in futures.values():
        assert future.result(TIMEOUT_S) is None
    described = {user: future.result(TIMEOUT_S)
                 for user, future in admin.describe_user_scram_credentials(["sam", "sue"]).items()}
    assert {user: [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
            for user, d in described.items()} == {"sam": [(ScramMechanism.SCRAM_SHA_256, 4096)],
                                                  "sue": [(ScramMechanism.SCRAM_SHA_512, 8192)]}
    return broker


def test_confluent_kafka_sees_kafkas_scram_credential_errors(scram_broker: Broker) -> None:
    """Kafka's messages name the user a describe cannot find, and an alteration's own error wins
    over the same credential altered twice (ZkAdminManager's and ScramControlManager's order)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": scram_broker.listeners["PLAINTEXT"]})
    (described,) = admin.describe_user_scram_credentials(["nobody"]).values()
    with pytest.raises(KafkaException) as missing:
        described.result(TIMEOUT_S)
    # librdkafka 2.x reads one byte past this message (the next field's first byte): hence startswith.
    assert missing.value.args[0].name() == "RESOURCE_NOT_FOUND"
    assert missing.value.args[0].str().startswith(
        "Attempt to describe a user credential that does not exist: nobody")
    weak = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100)
    (altered,) = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("w", weak, b"p"),
                                                     UserScramCredentialUpsertion("w", weak, b"q")]).values()
    with pytest.raises(KafkaException) as refused:
        altered.result(TIMEOUT_S)
    assert (refused.value.args[0].name(), refused.value.args[0].str()) == (
        "UNACCEPTABLE_CREDENTIAL", "Too few iterations")


@pytest.mark.parametrize(("mechanism", "user", "password"), [("SCRAM-SHA-256", "sam", "sam-pw"),
                                                             ("SCRAM-SHA-512", "sue", "sue-pw")])
def test_confluent_kafka_scram_after_alter_user_scram_credentials(
        scram_broker: Broker, mechanism: str, user: str, password: str) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer

    common = {"bootstrap.servers": scram_broker.listeners["SASL_PLAINTEXT"],
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": user}
    producer = Producer({**common, "sasl.password": password})
    producer.produce("scram-topic", b"scrammed")
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**common, "sasl.password": password, "group.id": "scram",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["scram-topic"])
    try:
        message = None
        for _ in range(TIMEOUT_S * 2):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.value() == b"scrammed"
    finally:
        consumer.close()
    errors: list[Any] = []
    refused = Producer({**common, "sasl.password": "wrong", "error_cb": errors.append,
                        "reconnect.backoff.ms": 1000})
    refused.produce("scram-topic", b"x")
    refused.flush(3)
    authentication = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    kafkas_message = ("Authentication failed during authentication due to invalid credentials with SASL "
                      f"mechanism {mechanism}")
    assert authentication and kafkas_message in authentication[0], errors


@pytest.mark.parametrize(("mechanism", "user", "password"), [("SCRAM-SHA-256", "sam", "sam-pw"),
                                                             ("SCRAM-SHA-512", "sue", "sue-pw")])
def test_kafka_python_scram_after_alter_user_scram_credentials(
        scram_broker: Broker, mechanism: str, user: str, password: str) -> None:
    config = kafka_python(scram_broker.listeners["SASL_PLAINTEXT"], user, password, mechanism)
    assert round_trips.kafka_python_round_trip(config, "kp-scram", b"salted") == b"salted"


def test_confluent_kafka_over_sasl_ssl(kafka_broker_factory: BrokerFactory, tmp_path: Any) -> None:
    """SASL_SSL: librdkafka verifies the broker's certificate, then logs in with PLAIN inside TLS."""
    import trustme
    from confluent_kafka import Producer

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    files = {name: tmp_path / name for name in ("server.pem", "server.key", "ca.pem")}
    files["server.pem"].write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(files["server.key"]))
    ca.cert_pem.write_to_path(str(files["ca.pem"]))
    broker = kafka_broker_factory({"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                                   "sasl.jaas.config": JAAS, "ssl.certfile": str(files["server.pem"]),
                                   "ssl.keyfile": str(files["server.key"])})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_SSL",
                         "ssl.ca.location": str(files["ca.pem"]), "sasl.mechanism": "PLAIN",
                         "sasl.username": "alice", "sasl.password": "secret"})
    producer.produce("over-tls", b"secret message")
    assert producer.flush(TIMEOUT_S) == 0
