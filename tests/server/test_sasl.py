"""SASL listeners over raw sockets: the exchange Kafka's SaslServerAuthenticator runs, the gate
before it completes, the principal after, and the config errors at start."""

from __future__ import annotations

import logging
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

sys.path.insert(0, str(Path(__file__).parent))  # the broker imports observer_fixtures by name

from observer_fixtures import RecordingObserver
from server_wire import KafkaSocket, raw_header

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import ConfigError

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" '
        'user_admin="a" user_alice="secret";')
SASL = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
BROKER_RESOURCE = 4  # Kafka's ConfigResource.Type.BROKER
AUTH_FAILED = "Authentication failed: Invalid username or password"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(SASL) as b:
        yield b


def handshake(s: KafkaSocket, mechanism: str = "PLAIN", version: int = 1) -> dict[str, object]:
    return dict(s.call(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism}).body)


def authenticate(s: KafkaSocket, token: bytes, version: int = 2) -> dict[str, object]:
    return dict(s.call(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}).body)


def plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def sasl_address(b: Broker) -> str:
    return b.listeners["SASL_PLAINTEXT"]


def test_plain_exchange_then_requests_are_served(broker: Broker) -> None:
    with KafkaSocket(sasl_address(broker)) as s:
        assert s.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
                      ).body["error_code"] == ErrorCode.NONE
        assert handshake(s) == {"error_code": ErrorCode.NONE, "mechanisms": ["PLAIN"]}
        answer = authenticate(s, plain("alice", "secret"))
        assert answer["error_code"] == ErrorCode.NONE and answer["error_message"] is None
        assert answer["auth_bytes"] == b"" and answer["session_lifetime_ms"] == 0
        assert s.call(ApiKey.METADATA, 12, {"topics": None}).body["brokers"]
        # After authentication the SASL requests are out of place, as in Kafka's KafkaApis.
        assert handshake(s)["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert authenticate(s, plain("alice", "secret"))["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


@pytest.mark.parametrize("version", [0, 1])
def test_handshake_without_api_versions_and_every_authenticate_version(broker: Broker, version: int) -> None:
    with KafkaSocket(sasl_address(broker)) as s:
        assert handshake(s)["error_code"] == ErrorCode.NONE
        assert authenticate(s, plain("admin", "a", authzid="admin"), version)["error_code"] == ErrorCode.NONE
        assert s.call(ApiKey.DESCRIBE_CLUSTER, 0, {}).body["error_code"] == ErrorCode.NONE


def test_handshake_v0_takes_bare_tokens(broker: Broker) -> None:
    """KIP-152's v0: after the handshake the token is a bare frame, and so is the answer."""
    with KafkaSocket(sasl_address(broker)) as s:
        assert handshake(s, version=0)["error_code"] == ErrorCode.NONE
        s.send_body(plain("alice", "secret"))
        assert s.read_frame() == b""  # PLAIN's empty challenge
        assert s.call(ApiKey.METADATA, 1, {"topics": None}).body["brokers"]
    with KafkaSocket(sasl_address(broker)) as s:
        assert handshake(s, version=0)["error_code"] == ErrorCode.NONE
        s.send_body(plain("alice", "wrong"))
        assert s.wait_closed() == b""  # no room for an error in a bare token: just the close


@pytest.mark.parametrize(("token", "message"), [
    (plain("alice", "wrong"), AUTH_FAILED),
    (plain("mallory", "secret"), AUTH_FAILED),
    (plain("", "secret"), "Authentication failed: username not specified"),
    (plain("alice", ""), "Authentication failed: password not specified"),
    (plain("alice", "secret", authzid="admin"),
     "Authentication failed: Client requested an authorization id that is different from username"),
    (b"alice\0secret", "Authentication failed during authentication due to invalid credentials with SASL "
                       "mechanism PLAIN"),
    (b"\xff\xfe\0\0\0\0", "Authentication failed during authentication due to invalid credentials with SASL "
                          "mechanism PLAIN"),
])
def test_refused_token_gets_kafkas_message_then_the_connection_closes(
        broker: Broker, token: bytes, message: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kafkapy"):
        with KafkaSocket(sasl_address(broker)) as s:
            assert handshake(s)["error_code"] == ErrorCode.NONE
            answer = authenticate(s, token)
            assert (answer["error_code"], answer["error_message"]) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                                       message)
            assert s.wait_closed() == b""
    failures = [r for r in caplog.records if "Failed authentication" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info]  # no traceback anywhere
    with KafkaSocket(sasl_address(broker)) as s:  # the broker keeps serving others
        assert handshake(s)["error_code"] == ErrorCode.NONE
        assert authenticate(s, plain("alice", "secret"))["error_code"] == ErrorCode.NONE


def test_unknown_mechanism_gets_the_enabled_list_then_the_close(broker: Broker) -> None:
    with KafkaSocket(sasl_address(broker)) as s:
        assert handshake(s, "SCRAM-SHA-256") == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                 "mechanisms": ["PLAIN"]}
        assert s.wait_closed() == b""


@pytest.mark.parametrize(("api_key", "version", "body"), [
    (ApiKey.METADATA, 12, {"topics": None}),
    (ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0secret"}),  # before the handshake
    (ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 100, "topic_data": []}),
])
def test_a_request_before_authentication_closes_the_connection(
        broker: Broker, api_key: int, version: int, body: dict[str, object],
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kafkapy"):
        with KafkaSocket(sasl_address(broker)) as s:
            s.send(api_key, version, body)
            assert s.wait_closed() == b""
    expected = f"Unexpected Kafka request of type {ApiKey(api_key).name} during SASL handshake"
    assert any(expected in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("api_key", "version", "body", "answer"), [
    (ApiKey.METADATA, 1, {"topics": [{"name": "t"}]},
     {"brokers": [], "controller_id": -1, "topics": [
         {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "name": "t", "is_internal": False, "partitions": []}]}),
    (ApiKey.METADATA, 1, {"topics": None}, {"brokers": [], "controller_id": -1, "topics": []}),
    (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                                                        "mechanisms": []}),
    (ApiKey.FIND_COORDINATOR, 0, {"key": "g"},
     {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "node_id": 0, "host": "", "port": 0}),
])
def test_a_request_after_the_handshake_but_before_authenticate_is_answered_then_closed(
        broker: Broker, api_key: int, version: int, body: dict[str, object], answer: dict[str, object],
        caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's handleSaslToken: the request's own error response (ILLEGAL_SASL_STATE), then the close."""
    with caplog.at_level(logging.INFO, logger="kafkapy"):
        with KafkaSocket(sasl_address(broker)) as s:
            assert handshake(s)["error_code"] == ErrorCode.NONE
            s.send(api_key, version, body, correlation_id=41)
            response = s.read_response(api_key, version)
            assert response.correlation_id == 41 and dict(response.body) == answer
            assert s.wait_closed() == b""
    expected = f"Unexpected Kafka request of type {ApiKey(api_key).name} during SASL authentication"
    assert any(expected in r.getMessage() for r in caplog.records)


def test_pipelined_frames_after_authentication_are_served_in_order(broker: Broker) -> None:
    """The frames of one read that follow the completing token go to the dispatcher."""
    with KafkaSocket(sasl_address(broker)) as s:
        s.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, correlation_id=1)
        s.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain("alice", "secret")}, correlation_id=2)
        s.send(ApiKey.API_VERSIONS, 0, {}, correlation_id=3)
        s.send(ApiKey.METADATA, 12, {"topics": None}, correlation_id=4)
        assert s.read_response(ApiKey.SASL_HANDSHAKE, 1).correlation_id == 1
        assert s.read_response(ApiKey.SASL_AUTHENTICATE, 2).body["error_code"] == ErrorCode.NONE
        assert s.read_response(ApiKey.API_VERSIONS, 0).correlation_id == 3
        assert s.read_response(ApiKey.METADATA, 12).correlation_id == 4


def test_unsupported_api_versions_version_may_be_retried(broker: Broker) -> None:
    with KafkaSocket(sasl_address(broker)) as s:
        s.send_body(raw_header(ApiKey.API_VERSIONS, 99, 5))  # a version no spec has
        assert s.read_response(ApiKey.API_VERSIONS, 0).body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert s.call(ApiKey.API_VERSIONS, 2).body["error_code"] == ErrorCode.NONE
        assert handshake(s)["error_code"] == ErrorCode.NONE


@pytest.mark.parametrize("name", ["no spaces allowed", "newline\n"])
def test_api_versions_with_an_invalid_client_software_name_may_be_retried(broker: Broker, name: str) -> None:
    """Kafka's handleApiVersionsRequest answers INVALID_REQUEST and stays where it was: the client
    may send ApiVersions again before the handshake."""
    with KafkaSocket(sasl_address(broker)) as s:
        bad = {"client_software_name": name, "client_software_version": "1"}
        assert s.call(ApiKey.API_VERSIONS, 3, bad).body["error_code"] == ErrorCode.INVALID_REQUEST
        good = {"client_software_name": "t", "client_software_version": "1"}
        assert s.call(ApiKey.API_VERSIONS, 3, good).body["error_code"] == ErrorCode.NONE
        assert handshake(s)["error_code"] == ErrorCode.NONE
        assert authenticate(s, plain("alice", "secret"))["error_code"] == ErrorCode.NONE


def test_sasl_apis_are_advertised_and_refused_on_a_plaintext_listener(broker: Broker) -> None:
    with KafkaSocket(broker.listeners["PLAINTEXT"]) as s:
        keys = {k["api_key"]: (k["min_version"], k["max_version"])
                for k in s.call(ApiKey.API_VERSIONS, 2).body["api_keys"]}
        assert keys[ApiKey.SASL_HANDSHAKE] == (0, 1) and keys[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        assert handshake(s)["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        # KafkaApis.handleSaslAuthenticateRequest: one message, whatever the listener.
        refused = authenticate(s, plain("alice", "secret"))
        assert (refused["error_code"], refused["error_message"]) == (
            ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
        assert s.call(ApiKey.METADATA, 12, {"topics": None}).body["brokers"]


def test_the_principal_is_the_authenticated_user() -> None:
    RecordingObserver.instances.clear()
    with Broker({**SASL, "observer.class.names": "observer_fixtures.RecordingObserver"}) as b:
        with KafkaSocket(sasl_address(b)) as s:
            assert handshake(s)["error_code"] == ErrorCode.NONE
            assert authenticate(s, plain("alice", "secret"))["error_code"] == ErrorCode.NONE
            s.call(ApiKey.METADATA, 12, {"topics": None})
        (observer,) = RecordingObserver.instances
        assert [(r[2], r[3]) for r in observer.requests if r[3] == ApiKey.METADATA] == [
            ("User:alice", ApiKey.METADATA)]
    RecordingObserver.instances.clear()


def test_the_authorizer_sees_the_sasl_principal() -> None:
    config = {**SASL, "authorizer.class.name": "allowlist", "super.users": "User:admin"}
    topic = {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000}
    with Broker(config) as b:
        for user, password, expected in (("alice", "secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                         ("admin", "a", ErrorCode.NONE)):
            with KafkaSocket(sasl_address(b)) as s:
                assert handshake(s)["error_code"] == ErrorCode.NONE
                assert authenticate(s, plain(user, password))["error_code"] == ErrorCode.NONE
                (created,) = s.call(ApiKey.CREATE_TOPICS, 4, topic).body["topics"]
                assert created["error_code"] == expected, user


def test_per_listener_mechanisms_and_the_global_jaas_fallback() -> None:
    config = {"listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
              "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
              "listener.name.b.sasl.enabled.mechanisms": "GSSAPI,PLAIN", "sasl.enabled.mechanisms": "PLAIN",
              "sasl.jaas.config":
                  'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="b";',
              "listener.name.a.plain.sasl.jaas.config": JAAS}
    with Broker(config) as b:
        for listener, user, password in (("A", "alice", "secret"), ("B", "bob", "b")):
            with KafkaSocket(b.listeners[listener]) as s:
                assert handshake(s) == {"error_code": ErrorCode.NONE, "mechanisms": ["PLAIN"]}
                assert authenticate(s, plain(user, password))["error_code"] == ErrorCode.NONE
        with KafkaSocket(b.listeners["B"]) as s:  # A's users are not B's
            assert handshake(s)["error_code"] == ErrorCode.NONE
            refused = authenticate(s, plain("alice", "secret"))
            assert refused["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize(("settings", "key"), [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-999"},
     "listener.name.sasl_plaintext.sasl.enabled.mechanisms"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "PlainLoginModule required user_a=\"b\""},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.scram.ScramLoginModule required;'},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
])
def test_sasl_configuration_errors_name_the_key(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as raised:
        with Broker({**SASL, **settings}):
            pass
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("delay_ms", [0, 300])
def test_the_close_after_a_failure_waits_connection_failed_authentication_delay_ms(delay_ms: int) -> None:
    """The answer, then the close after the delay (Kafka holds the answer for the delay: docs/security.md
    lists it); frames sent meanwhile go unanswered."""
    with Broker({**SASL, "connection.failed.authentication.delay.ms": str(delay_ms)}) as b:
        with KafkaSocket(sasl_address(b)) as s:
            assert handshake(s)["error_code"] == ErrorCode.NONE
            answer = authenticate(s, plain("alice", "wrong"))
            refused = time.monotonic()
            assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            if delay_ms:
                s.send(ApiKey.METADATA, 12, {"topics": None})
            assert s.wait_closed() == b""
            waited = time.monotonic() - refused
        assert waited >= delay_ms / 1000 * 0.9 and (delay_ms or waited < 0.25)


def test_sasl_ssl_authenticates_inside_tls(tmp_path: Path) -> None:
    """SASL_SSL: the TLS listener's handshake first, then the same SASL exchange; the principal is
    the SASL user, not the (absent) certificate's."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    certfile, keyfile = tmp_path / "server.pem", tmp_path / "server.key"
    certfile.write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(keyfile))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    RecordingObserver.instances.clear()
    config = {"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS, "ssl.certfile": str(certfile),
              "ssl.keyfile": str(keyfile), "observer.class.names": "observer_fixtures.RecordingObserver"}
    with Broker(config) as b:
        with KafkaSocket(b.listeners["SASL_SSL"], ssl_context=context) as s:
            assert handshake(s)["error_code"] == ErrorCode.NONE
            assert authenticate(s, plain("alice", "secret"))["error_code"] == ErrorCode.NONE
            assert s.call(ApiKey.METADATA, 12, {"topics": None}).body["brokers"]
        with KafkaSocket(b.listeners["SASL_SSL"], ssl_context=context) as s:
            s.send(ApiKey.METADATA, 12, {"topics": None})
            assert s.wait_closed() == b""
        (observer,) = RecordingObserver.instances
        assert [r[2] for r in observer.requests if r[3] == ApiKey.METADATA] == ["User:alice"]
    RecordingObserver.instances.clear()


def test_describe_configs_hides_the_jaas_passwords() -> None:
    config = {**SASL, "sasl.jaas.config": JAAS}
    with Broker(config) as b:
        with KafkaSocket(b.listeners["PLAINTEXT"]) as s:
            keys = ["sasl.jaas.config", "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                    "sasl.enabled.mechanisms"]
            (resource,) = s.call(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": BROKER_RESOURCE, "resource_name": str(b.broker_id),
                 "configuration_keys": keys}]}).body["results"]
        described = {c["name"]: (c["value"], c["is_sensitive"]) for c in resource["configs"]}
        assert described == {keys[0]: (None, True), keys[1]: (None, True), keys[2]: ("PLAIN", False)}


def test_a_frame_over_sasl_server_max_receive_size_before_authentication_closes(
        caplog: pytest.LogCaptureFixture) -> None:
    with Broker({**SASL, "sasl.server.max.receive.size": "1000"}) as b:
        with caplog.at_level(logging.INFO, logger="kafkapy"), KafkaSocket(sasl_address(b)) as s:
            assert handshake(s)["error_code"] == ErrorCode.NONE
            s.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + b"x" * 2000})
            assert s.wait_closed() == b""
        assert any("larger than 1000" in r.getMessage() for r in caplog.records)
        with KafkaSocket(sasl_address(b)) as s:  # authenticated, the limit is socket.request.max.bytes
            assert handshake(s)["error_code"] == ErrorCode.NONE
            assert authenticate(s, plain("alice", "secret"))["error_code"] == ErrorCode.NONE
            big = {"topics": [{"name": f"t{i:04d}"} for i in range(200)]}
            assert len(s.call(ApiKey.METADATA, 12, big).body["topics"]) == 200
