"""Real clients with signed OAUTHBEARER tokens (KIP-768): the listener names Kafka's
OAuthBearerValidatorCallbackHandler, and a small identity provider in the test serves its JWKS
over https (a trustme CA the broker trusts through the JAAS entry's PEM trust store) and a
client_credentials token endpoint. confluent-kafka fetches its own tokens from that endpoint
(librdkafka's ``sasl.oauthbearer.method=oidc``); kafka-python and aiokafka take them from a token
provider. Refused tokens (bad signature, unknown kid, expired, wrong audience or issuer, no sub,
alg none) get Kafka's ``invalid_token`` challenge and the reason in the broker's log; a rotated key
is found by the early JWKS refresh; sessions re-authenticate (KIP-368) with signed tokens; the
broker's virtual clock decides expiry; and an unreachable JWKS fails the start."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from oidc_provider import AUDIENCE, CLIENTS, ISSUER, IdentityProvider, broker_config
from quick_clients import RDKAFKA_CLIENT
from round_trips import aiokafka_round_trip, confluent_round_trip, kafka_python_round_trip

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.server.config import ConfigError
from kafkapy.server.sasl.jwks import public_jwk
from kafkapy.server.sasl.signed_jws import make_signed_jws
from kafkapy.server.sasl.unsecured_jws import make_unsecured_jws
from kafkapy.testing import BrokerFactory

pytest.importorskip("trustme")

TIMEOUT_S = 10
INVALID_TOKEN = '{"status":"invalid_token"}'


@pytest.fixture
def oidc_broker(idp: IdentityProvider, kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory(broker_config(idp))


def principals(broker: Broker) -> set[str]:
    return {c.principal for c in broker.connections() if c.sasl_mechanism is not None and c.authentications}


# --- confluent-kafka: librdkafka's own OIDC client ------------------------------------------------

def oidc_client(broker: Broker, idp: IdentityProvider, client_id: str = "svc-orders",
                **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client_id, "sasl.oauthbearer.client.secret": CLIENTS[client_id],
            "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token", "sasl.oauthbearer.scope": "kafka",
            "https.ca.location": str(idp.ca_file), **RDKAFKA_CLIENT, **extra}


def test_confluent_kafka_oidc_produces_and_consumes(oidc_broker: Broker, idp: IdentityProvider) -> None:
    """librdkafka fetches a token from the provider's token endpoint and the broker checks it with
    the provider's JWKS: the client is User:<its client id>."""
    def logged_in_with_the_providers_token() -> None:
        assert principals(oidc_broker) == {"User:svc-orders"}
        assert idp.token_requests and idp.token_requests[0]["grant_type"] == "client_credentials"

    assert confluent_round_trip(oidc_client(oidc_broker, idp),
                                oidc_client(oidc_broker, idp, **{"group.id": "oidc-group"}), "oidc-orders",
                                after_produce=logged_in_with_the_providers_token) == [b"one", b"two"]


def confluent_with_token(broker: Broker, token: str, **extra: Any) -> dict[str, Any]:
    """librdkafka handing the broker ``token`` (its oauth_cb), told it lasts an hour."""
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 3600, "alice", {}),
            **RDKAFKA_CLIENT, **extra}


def authentication_errors(config: dict[str, Any]) -> list[str]:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**config, "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    producer.produce("refused", b"x")
    producer.flush(2)
    return [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]


def _other_key_token(idp: IdentityProvider) -> str:
    return make_signed_jws({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": int(time.time()),
                            "exp": int(time.time()) + 600},
                           rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256", "k1")


REFUSALS = {
    "bad signature": (_other_key_token, "JWS signature check failed"),
    "unknown kid": (lambda idp: make_signed_jws({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE,
                                                 "iat": int(time.time()), "exp": int(time.time()) + 600},
                                                idp.keys["k1"], "RS256", "unknown"), "no key in the JWKS"),
    "expired": (lambda idp: idp.token(lifetime_s=-120), "the JWT has expired"),
    "wrong audience": (lambda idp: idp.token(aud="another-cluster"), "holds none of the expected audiences"),
    "wrong issuer": (lambda idp: idp.token(iss="https://evil.test"), "is not the expected 'https://idp.test'"),
    "no sub": (lambda idp: idp.token(None), "sub value must be non-null"),
    "alg none": (lambda idp: make_unsecured_jws({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE,
                                                 "iat": int(time.time()),
                                                 "exp": int(time.time()) + 600}) + "x",
                 "'none' is not a permitted algorithm"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_tokens_get_invalid_token_and_the_broker_logs_why(
        oidc_broker: Broker, idp: IdentityProvider, caplog: pytest.LogCaptureFixture, case: str) -> None:
    from confluent_kafka import Producer

    make, reason = REFUSALS[case]
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.sasl"):
        errors = authentication_errors(confluent_with_token(oidc_broker, make(idp)))
    assert errors and all(INVALID_TOKEN in e for e in errors), errors
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("kafkapy.server.sasl")]
    assert any(reason in m for m in logged), logged
    assert not principals(oidc_broker)  # no refused connection stayed authenticated
    if case == "unknown kid":  # the broker fetched the JWKS again, and the kid is still unknown
        assert idp.jwks_gets == 2 and len(errors) >= 2, (idp.jwks_gets, errors)
    # The broker is fine: a good token produces.
    producer = Producer(confluent_with_token(oidc_broker, idp.token()))
    producer.produce("after-refusal", b"ok")
    assert producer.flush(TIMEOUT_S) == 0


def test_a_rotated_key_is_accepted_after_the_early_refresh(oidc_broker: Broker,
                                                           idp: IdentityProvider) -> None:
    """The provider signs with a new key: the broker does not have it, refuses the first attempt and
    fetches the JWKS again at once; the client's next attempt is accepted."""
    from confluent_kafka import Producer

    assert idp.jwks_gets == 1  # at start
    kid = idp.rotate()
    delivered: list[Any] = []
    producer = Producer(confluent_with_token(oidc_broker, idp.token(kid=kid), **{"reconnect.backoff.ms": 200,
                                                                               "message.timeout.ms": 20000}))
    producer.produce("rotated", b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S * 2) == 0
    assert delivered == [None]
    assert idp.jwks_gets == 2


# --- kafka-python and aiokafka: token providers --------------------------------------------------

def kafka_python(broker: Broker, tokens: Any) -> dict[str, Any]:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return str(tokens())

    return {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider(),
            "request_timeout_ms": TIMEOUT_S * 1000}


def test_kafka_python_produces_and_consumes_with_signed_tokens(oidc_broker: Broker,
                                                               idp: IdentityProvider) -> None:
    def logged_in_as_alice() -> None:
        assert principals(oidc_broker) == {"User:alice"}

    config = kafka_python(oidc_broker, idp.token)
    assert kafka_python_round_trip(config, "kp-oidc", b"hello", "kp-oidc-group",
                                   after_produce=logged_in_as_alice) == b"hello"


def test_aiokafka_produces_and_consumes_with_signed_tokens(oidc_broker: Broker,
                                                           idp: IdentityProvider) -> None:
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return idp.token("bob")

    def logged_in_as_bob() -> None:
        assert principals(oidc_broker) == {"User:bob"}

    common: dict[str, Any] = {"bootstrap_servers": oidc_broker.bootstrap_servers,
                              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                              "sasl_oauth_token_provider": Provider()}
    assert aiokafka_round_trip(common, "aio-oidc", b"async", "aio-oidc-group",
                               after_produce=logged_in_as_bob) == b"async"


def test_kafka_python_re_authenticates_with_signed_tokens(idp: IdentityProvider,
                                                          kafka_broker_factory: BrokerFactory) -> None:
    """KIP-368: every session ends after connections.max.reauth.ms; each re-authentication brings a
    fresh signed token from the provider."""
    from kafka import KafkaProducer

    broker = kafka_broker_factory(broker_config(idp, **{"connections.max.reauth.ms": 2000}))
    issued: list[str] = []

    def tokens() -> str:
        issued.append(idp.token())
        return issued[-1]

    producer = KafkaProducer(**kafka_python(broker, tokens), linger_ms=0)
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            producer.send("kp-oidc-reauth", b"v").get(timeout=TIMEOUT_S)
            time.sleep(0.05)
        counts = sorted(c.authentications for c in broker.connections() if c.sasl_mechanism is not None)
    finally:
        producer.close()
    assert counts and counts[-1] >= 3, counts
    assert len(issued) >= 3


def test_a_signed_token_expires_when_the_brokers_virtual_clock_passes_it(
        idp: IdentityProvider, kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    """The token's exp is judged by the broker's clock: the same token, accepted, is refused once the
    virtual clock has moved two hours on (the skew covers the real seconds the clock stood still)."""
    from confluent_kafka import Producer

    broker = kafka_broker_factory(broker_config(idp, **{"sasl.oauthbearer.clock.skew.seconds": 600}))
    token = idp.token()
    assert Producer(confluent_with_token(broker, token)).list_topics(timeout=TIMEOUT_S).brokers
    kafka_clock.advance(2 * 3600)
    errors = authentication_errors(confluent_with_token(broker, token))
    assert errors and all(INVALID_TOKEN in e for e in errors), errors


# --- start ---------------------------------------------------------------------------------------

def test_the_start_fails_clearly_when_the_jwks_cannot_be_fetched(idp: IdentityProvider) -> None:
    config = broker_config(idp, **{"sasl.oauthbearer.jwks.endpoint.url": f"{idp.url}/missing"})
    with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url.*HTTP 404") as raised:
        with Broker(config):
            pass
    assert "\n" not in str(raised.value)
    untrusted = broker_config(idp)
    untrusted["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = \
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    with pytest.raises(ConfigError, match="CERTIFICATE_VERIFY_FAILED"):
        with Broker(untrusted):
            pass


def test_a_file_jwks_serves_signed_tokens(idp: IdentityProvider, tmp_path: Path,
                                          kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka import Producer

    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [public_jwk(idp.keys["k1"], "k1")]}))
    broker = kafka_broker_factory(broker_config(idp, **{"sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri()}))
    producer = Producer(confluent_with_token(broker, idp.token()))
    producer.produce("file-jwks", b"v")
    assert producer.flush(TIMEOUT_S) == 0
    assert principals(broker) == {"User:alice"}
