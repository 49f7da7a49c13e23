"""Real clients with SASL/OAUTHBEARER and unsecured JWTs (Kafka's default broker-side validation):
confluent-kafka (librdkafka makes its own tokens, ``enable.sasl.oauthbearer.unsecure.jwt``),
kafka-python and aiokafka (a token provider) and kcat authenticate, produce and consume as the
token's principal, which the ACL authorizer sees; a token without the required scope, and one that
has expired (by its own ``exp``, or because the broker's virtual clock moved past it), are refused
with Kafka's error challenge as the message."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from typing import Any

import pytest
from quick_clients import RDKAFKA_CLIENT
from round_trips import aiokafka_round_trip, confluent_round_trip, kafka_python_round_trip

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.server.sasl.unsecured_jws import make_unsecured_jws
from kafkapy.testing import BrokerFactory

TIMEOUT_S = 10
REQUIRED_SCOPE = "kafka"
JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'unsecuredValidatorRequiredScope="{REQUIRED_SCOPE}";')
OAUTH_BROKER = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
                "authorizer.class.name": "acl", "super.users": "User:admin"}
INSUFFICIENT_SCOPE = '{"status":"insufficient_scope", "scope":"[kafka]"}'
INVALID_TOKEN = '{"status":"invalid_token"}'


@pytest.fixture
def oauth_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory(OAUTH_BROKER)


def confluent(broker: Broker, principal: str, scope: str = REQUIRED_SCOPE, **extra: Any) -> dict[str, Any]:
    """librdkafka's own unsecured JWT for ``principal`` (lifeSeconds: its default, an hour)."""
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} scope={scope}", **RDKAFKA_CLIENT, **extra}


def grant_alice(broker: Broker, topic: str, group: str) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    def allow(resource: ResourceType, name: str, operation: AclOperation) -> AclBinding:
        return AclBinding(resource, name, ResourcePatternType.LITERAL, "User:alice", "*", operation,
                          AclPermissionType.ALLOW)

    admin = AdminClient(confluent(broker, "admin"))
    bindings = [allow(ResourceType.TOPIC, topic, AclOperation.ALL),
                allow(ResourceType.GROUP, group, AclOperation.READ)]
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
        assert future.result(TIMEOUT_S) is None


def delivery_error(config: dict[str, Any], topic: str) -> Any:
    from confluent_kafka import Producer

    reports: list[Any] = []
    producer = Producer({**config, "message.timeout.ms": 5000})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(TIMEOUT_S)
    assert reports, "no delivery report"
    return reports[0]


def authentication_errors(config: dict[str, Any]) -> list[str]:
    """What librdkafka's error callback reports as authentication errors while it tries to produce."""
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**config, "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    producer.produce("refused", b"x")
    producer.flush(2)
    return [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]


def test_confluent_kafka_produces_and_consumes_as_the_tokens_principal(oauth_broker: Broker) -> None:
    """alice's token gets her no rights until the ACLs grant them: the principal is User:alice."""

    refused = delivery_error(confluent(oauth_broker, "alice"), "oauth-orders")
    assert refused.name() == "TOPIC_AUTHORIZATION_FAILED"
    grant_alice(oauth_broker, "oauth-orders", "oauth-group")
    assert confluent_round_trip(confluent(oauth_broker, "alice"),
                                confluent(oauth_broker, "alice", **{"group.id": "oauth-group"}),
                                "oauth-orders") == [b"one", b"two"]


def test_confluent_kafka_token_without_the_required_scope_is_refused(oauth_broker: Broker) -> None:
    errors = authentication_errors(confluent(oauth_broker, "alice", scope="read"))
    assert errors and all(INSUFFICIENT_SCOPE in e for e in errors), errors


def test_confluent_kafka_expired_token_is_refused(oauth_broker: Broker) -> None:
    """librdkafka refuses to use a token it is told has expired, so its token callback hands it one
    whose own ``exp`` claim is past while telling librdkafka it has an hour: the broker reads the claim."""
    expired = make_unsecured_jws({"sub": "alice", "scope": REQUIRED_SCOPE, "exp": time.time() - 60})

    def token(_config: str) -> tuple[str, float, str, dict[str, str]]:
        return expired, time.time() + 3600, "alice", {}

    config = {k: v for k, v in confluent(oauth_broker, "alice").items()
              if k not in ("enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.config")}
    errors = authentication_errors({**config, "oauth_cb": token})
    assert errors and all(INVALID_TOKEN in e for e in errors), errors


def test_a_token_expires_when_the_brokers_virtual_clock_passes_it(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    """librdkafka's token lasts an hour by the real clock; the broker judges it by its own. A virtual
    clock that stands still falls behind the real one, and the token's ``iat`` (real time) would be
    after it: the allowable clock skew covers the test's real seconds."""
    from confluent_kafka import Producer

    jaas = JAAS.replace("required ", 'required unsecuredValidatorAllowableClockSkewMs="600000" ')
    broker = kafka_broker_factory({**OAUTH_BROKER,
                                   "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas})
    assert Producer(confluent(broker, "admin")).list_topics(timeout=TIMEOUT_S).brokers  # authenticated
    kafka_clock.advance(2 * 3600)
    errors = authentication_errors(confluent(broker, "admin"))
    assert errors and all(INVALID_TOKEN in e for e in errors), errors


# --- kafka-python and aiokafka: a token provider ------------------------------------------------

def token_for(principal: str, scope: str = REQUIRED_SCOPE, lifetime_s: float = 3600) -> str:
    return make_unsecured_jws({"sub": principal, "scope": scope, "iat": int(time.time()),
                               "exp": time.time() + lifetime_s})


def kafka_python(broker: Broker, token: str) -> dict[str, Any]:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return token

        def extensions(self) -> dict[str, str]:
            return {"traceId": "kp"}  # extensions reach the broker and are accepted

    return {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider(),
            "request_timeout_ms": TIMEOUT_S * 1000}


def test_kafka_python_produces_and_consumes_with_a_token_provider(oauth_broker: Broker) -> None:
    grant_alice(oauth_broker, "kp-oauth", "kp-group")
    config = kafka_python(oauth_broker, token_for("alice"))
    assert kafka_python_round_trip(config, "kp-oauth", b"hello", "kp-group") == b"hello"


@pytest.mark.parametrize(("token", "refusal"), [(token_for("alice", scope="read"), INSUFFICIENT_SCOPE),
                                                (token_for("alice", lifetime_s=-60), INVALID_TOKEN)])
def test_kafka_python_refused_token_is_an_authentication_error(
        oauth_broker: Broker, caplog: pytest.LogCaptureFixture, token: str, refusal: str) -> None:
    import logging

    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError

    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaAdminClient(bootstrap_timeout_ms=2000, **kafka_python(oauth_broker, token))
    reported = [r.getMessage() for r in caplog.records if r.name.startswith("kafka.")]
    assert any("SaslAuthenticationFailedError" in m and refusal in m for m in reported), reported


def test_aiokafka_produces_and_consumes_with_a_token_provider(oauth_broker: Broker) -> None:
    from aiokafka.abc import AbstractTokenProvider

    grant_alice(oauth_broker, "aio-oauth", "aio-group")

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return token_for("alice")

    common: dict[str, Any] = {"bootstrap_servers": oauth_broker.bootstrap_servers,
                              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                              "sasl_oauth_token_provider": Provider()}
    assert aiokafka_round_trip(common, "aio-oauth", b"async", "aio-group") == b"async"


def test_aiokafka_token_without_the_required_scope_is_refused(
        oauth_broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """aiokafka 0.14 does not answer the error challenge with %x01 (RFC 7628): it takes the
    challenge for success and sends Metadata. Kafka's authenticator answers that with Metadata's
    error response (no brokers, no topics) and closes: aiokafka ignores the empty answer, starts
    with no broker, and cannot produce."""
    import logging

    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from aiokafka.errors import KafkaError

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return token_for("alice", scope="read")

    async def start_and_send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=oauth_broker.bootstrap_servers,
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                                    sasl_oauth_token_provider=Provider(), request_timeout_ms=3000)
        try:
            await producer.start()
            assert not producer.client.cluster.brokers()
            await asyncio.wait_for(producer.send_and_wait("t", b"v"), TIMEOUT_S)
        finally:
            await producer.stop()

    with caplog.at_level(logging.DEBUG, logger="kafkapy.server.sasl"), pytest.raises(KafkaError):
        asyncio.run(start_and_send())
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("kafkapy.server.sasl")]
    assert any("was missing a required scope (kafka)" in m for m in logged), logged
    unexpected = "Unexpected Kafka request of type METADATA during SASL authentication"
    assert any(unexpected in m for m in logged), logged


# --- kcat ---------------------------------------------------------------------------------------

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED: kcat OAUTHBEARER interop test SKIPPED")
def test_kcat_lists_metadata_with_an_unsecured_token(oauth_broker: Broker) -> None:
    assert KCAT is not None

    def listing(scope: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KCAT, "-L", "-J", "-b", oauth_broker.bootstrap_servers, "-m", "5",
                               "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=OAUTHBEARER",
                               "-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
                               "-X", f"sasl.oauthbearer.config=principal=alice scope={scope}"],
                              capture_output=True, text=True, timeout=TIMEOUT_S * 3)

    result = listing(REQUIRED_SCOPE)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["brokers"] == [{"id": oauth_broker.broker_id,
                                                     "name": oauth_broker.bootstrap_servers}]
    refused = listing("read")
    assert refused.returncode != 0 and INSUFFICIENT_SCOPE in refused.stderr


# --- KIP-368: clients re-authenticate on the same connection -------------------------------------

REAUTH_MS = 2000  # the session; clients re-authenticate at 85-95% of it (Kafka: at most once a second)
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="a" user_admin="a" user_alice="secret";')


def authentications(broker: Broker) -> list[int]:
    """How many times each open SASL connection has authenticated (kafkapy.inspection.connections)."""
    return sorted(c.authentications for c in broker.connections() if c.sasl_mechanism is not None)


@pytest.mark.parametrize("mechanism", ["OAUTHBEARER", "PLAIN"])
def test_confluent_kafka_re_authenticates_and_keeps_producing(
        kafka_broker_factory: BrokerFactory, mechanism: str) -> None:
    from confluent_kafka import Producer

    broker = kafka_broker_factory({**OAUTH_BROKER, "sasl.enabled.mechanisms": mechanism,
                                   "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                                   "super.users": "User:alice", "connections.max.reauth.ms": REAUTH_MS})
    if mechanism == "PLAIN":
        config: dict[str, Any] = {"bootstrap.servers": broker.bootstrap_servers,
                                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.username": "alice", "sasl.password": "secret"}
    else:
        config = confluent(broker, "alice")
    errors: list[Any] = []
    producer = Producer({**config, "error_cb": errors.append, "linger.ms": 0})
    delivered: list[Any] = []
    deadline = time.monotonic() + 4 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce("reauth", b"v", on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0.05)
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered and all(err is None for err in delivered), {str(e) for e in delivered}
    assert errors == []
    # The producer's connection authenticated once and re-authenticated every session since.
    counts = authentications(broker)
    assert counts and counts[-1] >= 3, counts


def test_kafka_python_re_authenticates_and_keeps_producing(kafka_broker_factory: BrokerFactory) -> None:
    from kafka import KafkaProducer

    broker = kafka_broker_factory({**OAUTH_BROKER, "super.users": "User:alice",
                                   "connections.max.reauth.ms": REAUTH_MS})
    producer = KafkaProducer(**kafka_python(broker, token_for("alice")), linger_ms=0)
    try:
        deadline = time.monotonic() + 4 * REAUTH_MS / 1000
        while time.monotonic() < deadline:
            producer.send("kp-reauth", b"v").get(timeout=TIMEOUT_S)
            time.sleep(0.05)
        counts = authentications(broker)
    finally:
        producer.close()
    assert counts and counts[-1] >= 3, counts
