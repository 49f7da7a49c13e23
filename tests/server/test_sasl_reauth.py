"""KIP-368 re-authentication over raw sockets, on a broker whose clock the test moves: the session
lifetime SaslAuthenticate v1+ answers (connections.max.reauth.ms, an OAUTHBEARER token's expiry,
the sooner), a re-authentication on the same connection (same mechanism, same principal, at most
one a second), and a connection that does not re-authenticate closed at its first request after
its session ended, as Kafka's SocketServer closes it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from server_wire import KafkaSocket

from kafkapy import Broker, VirtualClock
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import ConfigError
from kafkapy.server.sasl.unsecured_jws import make_unsecured_jws

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="a" user_admin="a" user_alice="secret";')
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
MAX_REAUTH_MS = 60_000
CONFIG = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
          "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
          # per listener and mechanism, as Kafka reads it; OAUTHBEARER keeps the broker-wide 0 (no cap)
          "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": MAX_REAUTH_MS}


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def broker(clock: VirtualClock) -> Iterator[Broker]:
    with Broker(CONFIG, clock=clock) as b:
        yield b


def plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def bearer(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def login(s: KafkaSocket, mechanism: str, token: bytes, version: int = 2) -> dict[str, object]:
    handshake = s.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}).body
    assert handshake["error_code"] == ErrorCode.NONE, handshake
    return dict(s.call(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}).body)


def lifetime_of(answer: dict[str, object]) -> int:
    lifetime = answer["session_lifetime_ms"]
    assert isinstance(lifetime, int)
    return lifetime


def metadata_served(s: KafkaSocket) -> bool:
    return bool(s.call(ApiKey.METADATA, 12, {"topics": None}).body["brokers"])


def test_session_lifetime_is_connections_max_reauth_ms_and_the_client_re_authenticates(
        broker: Broker, clock: VirtualClock) -> None:
    with KafkaSocket(broker.bootstrap_servers) as s:
        answer = login(s, "PLAIN", plain("alice", "secret"))
        assert answer["error_code"] == ErrorCode.NONE and answer["session_lifetime_ms"] == MAX_REAUTH_MS
        assert metadata_served(s)
        for _ in range(3):  # each re-authentication starts a new session of the same length
            clock.advance(MAX_REAUTH_MS / 1000 - 1)
            again = login(s, "PLAIN", plain("alice", "secret"))
            assert again["error_code"] == ErrorCode.NONE and again["session_lifetime_ms"] == MAX_REAUTH_MS
            assert metadata_served(s)
        (view,) = broker.connections()  # what the broker holds of it (kafkapy.inspection.connections)
        assert (view.principal, view.sasl_mechanism, view.authentications) == ("User:alice", "PLAIN", 4)
        assert view.session_end_ms == int(clock.wall() * 1000) + MAX_REAUTH_MS
        clock.advance(MAX_REAUTH_MS / 1000 + 1)  # past the last session: the next request closes it
        s.send(ApiKey.METADATA, 12, {"topics": None})
        assert s.wait_closed() == b""


def test_a_second_re_authentication_within_a_second_is_out_of_place(broker: Broker,
                                                                    clock: VirtualClock) -> None:
    """KafkaChannel's one-a-second rule: the handshake goes to the API layer, ILLEGAL_SASL_STATE."""
    with KafkaSocket(broker.bootstrap_servers) as s:
        login(s, "PLAIN", plain("alice", "secret"))
        assert login(s, "PLAIN", plain("alice", "secret"))["error_code"] == ErrorCode.NONE
        refused = s.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).body
        assert refused["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        clock.advance(1)
        assert login(s, "PLAIN", plain("alice", "secret"))["error_code"] == ErrorCode.NONE


def test_re_authentication_cannot_change_the_principal(broker: Broker, clock: VirtualClock) -> None:
    with KafkaSocket(broker.bootstrap_servers) as s:
        login(s, "PLAIN", plain("alice", "secret"))
        refused = login(s, "PLAIN", plain("admin", "a"))
        assert refused["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert refused["error_message"] == ("Cannot change principals during re-authentication from "
                                            "User.alice: User.admin")
        clock.advance(1)  # connection.failed.authentication.delay.ms runs on the broker's clock
        assert s.wait_closed() == b""


def test_re_authentication_cannot_change_the_mechanism(broker: Broker, clock: VirtualClock) -> None:
    """Kafka answers the handshake (the mechanism is enabled), then closes at the token."""
    with KafkaSocket(broker.bootstrap_servers) as s:
        login(s, "PLAIN", plain("alice", "secret"))
        answer = s.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).body
        assert answer["error_code"] == ErrorCode.NONE
        s.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": bearer(make_unsecured_jws({"sub": "alice",
                                                                                       "exp": 2**40}))})
        clock.advance(1)
        assert s.wait_closed() == b""


def test_a_client_that_cannot_re_authenticate_is_closed_after_its_session(
        broker: Broker, clock: VirtualClock) -> None:
    """SaslAuthenticate v0 has no session_lifetime_ms, but the session still ends (as in Kafka)."""
    with KafkaSocket(broker.bootstrap_servers) as s:
        assert login(s, "PLAIN", plain("alice", "secret"), version=0)["error_code"] == ErrorCode.NONE
        clock.advance(MAX_REAUTH_MS / 1000 - 1)
        assert metadata_served(s)
        clock.advance(2)
        s.send(ApiKey.METADATA, 12, {"topics": None})
        assert s.wait_closed() == b""


def test_oauthbearer_session_lasts_as_long_as_the_token(broker: Broker, clock: VirtualClock) -> None:
    now_s = int(clock.wall())  # whole seconds, so iat is not after the broker's millisecond clock
    token = make_unsecured_jws({"sub": "alice", "iat": now_s, "exp": now_s + 300})
    with KafkaSocket(broker.bootstrap_servers) as s:
        answer = login(s, "OAUTHBEARER", bearer(token))
        assert answer["auth_bytes"] == b"" and answer["error_code"] == ErrorCode.NONE
        assert lifetime_of(answer) in range(299_000, 300_001)  # the token's remaining lifetime
        clock.advance(200)  # a fresh token, a fresh session
        fresh = make_unsecured_jws({"sub": "alice", "iat": now_s + 200, "exp": now_s + 500})
        assert lifetime_of(login(s, "OAUTHBEARER", bearer(fresh))) in range(299_000, 300_001)
        clock.advance(301)
        s.send(ApiKey.METADATA, 12, {"topics": None})
        assert s.wait_closed() == b""


def test_oauthbearer_session_is_capped_by_connections_max_reauth_ms(clock: VirtualClock) -> None:
    config = {**CONFIG, "connections.max.reauth.ms": 10_000}
    token = make_unsecured_jws({"sub": "alice", "exp": clock.wall() + 300})
    with Broker(config, clock=clock) as b, KafkaSocket(b.bootstrap_servers) as s:
        assert login(s, "OAUTHBEARER", bearer(token))["session_lifetime_ms"] == 10_000


def test_without_connections_max_reauth_ms_a_plain_session_never_ends(clock: VirtualClock) -> None:
    config = {**{k: v for k, v in CONFIG.items() if not k.endswith("connections.max.reauth.ms")},
              "connections.max.idle.ms": 100 * 24 * 3600 * 1000}  # not closed as idle either
    with Broker(config, clock=clock) as b, KafkaSocket(b.bootstrap_servers) as s:
        assert login(s, "PLAIN", plain("alice", "secret"))["session_lifetime_ms"] == 0
        clock.advance(10 * 24 * 3600)
        assert metadata_served(s)
        assert s.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).body["error_code"] == \
            ErrorCode.ILLEGAL_SASL_STATE


OAUTH_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"


@pytest.mark.parametrize(("settings", "key"), [
    ({"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "soon"},
     "listener.name.sasl_plaintext.plain.connections.max.reauth.ms"),
    ({OAUTH_KEY: None}, OAUTH_KEY),  # no JAAS entry for OAUTHBEARER at all
    ({OAUTH_KEY: PLAIN_JAAS}, OAUTH_KEY),
    ({OAUTH_KEY: OAUTH_JAAS.replace("required", 'required unsecuredValidatorAllowableClockSkewMs="-5"')},
     OAUTH_KEY),
    ({"sasl.oauthbearer.jwks.endpoint.url": "file:///no/such/jwks.json",  # a signed-token validator's keys
      "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
          "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
     "sasl.oauthbearer.jwks.endpoint.url"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.example.Validator"},
     "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"),
])
def test_reauth_and_oauthbearer_configuration_errors_name_the_key(settings: dict[str, str | None],
                                                                  key: str) -> None:
    config = {k: v for k, v in {**CONFIG, **settings}.items() if v is not None}
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as raised:
        with Broker(config):
            pass
    assert "\n" not in str(raised.value)


def test_connections_inspection_without_sasl(clock: VirtualClock) -> None:
    config = {**CONFIG, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
    with Broker(config, clock=clock) as b, KafkaSocket(b.listeners["PLAINTEXT"]) as s:
        assert metadata_served(s)
        (view,) = b.connections()
        assert (view.listener, view.principal, view.sasl_mechanism, view.authentications,
                view.session_end_ms) == ("PLAINTEXT", "User:ANONYMOUS", None, 0, None)
        assert view.broker_id == b.broker_id and view.client_address == s.sock.getsockname()


def test_re_authentication_after_a_v0_handshake_takes_a_bare_token(broker: Broker) -> None:
    """As the first exchange may: tokens and challenges are bare size-prefixed frames."""
    with KafkaSocket(broker.bootstrap_servers) as s:
        login(s, "PLAIN", plain("alice", "secret"))
        assert s.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).body["error_code"] == ErrorCode.NONE
        s.send_body(plain("alice", "secret"))
        assert s.read_frame() == b""  # PLAIN's empty challenge: the session is renewed
        assert metadata_served(s)
        (view,) = broker.connections()
        assert view.authentications == 2
