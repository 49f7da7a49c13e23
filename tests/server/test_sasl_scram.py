"""SCRAM-SHA-256/512: the exchange against RFC 7677's example and an independent client, the
credential format, the parser under Hypothesis, and the credential APIs over raw sockets."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.sasl import scram
from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse
from kafkapy.server.sasl.scram import (
    MECHANISMS,
    ScramCredential,
    ScramServer,
    credential_from_salted_password,
    parse_credential,
    salted_password,
)

SHA256, SHA512 = 1, 2  # Kafka's ScramMechanism codes in the protocol


# --- an independent client (RFC 5802 section 3, written from the RFC) ----------------------------

def client_exchange(server: ScramServer, hash_name: str, user: str, password: str,
                    nonce: str = "fyko+d2lbbFgONRv9qkxdawL") -> bytes:
    """Runs the whole exchange; returns the server-final message."""
    first_bare = f"n={user},r={nonce}"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    assert fields["r"].startswith(nonce) and len(fields["r"]) > len(nonce)
    salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hash_name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    server_final = server.evaluate(f"{without_proof},p={proof}".encode())
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    expected = base64.b64encode(hmac.new(server_key, auth_message, hash_name).digest())
    assert server_final == b"v=" + expected
    return server_final


def credential(mechanism: str, password: str, iterations: int = 4096, salt: bytes = b"0123456789abcdef"
               ) -> ScramCredential:
    scheme = MECHANISMS[mechanism]
    return credential_from_salted_password(scheme, salt, salted_password(scheme, password, salt, iterations),
                                           iterations)


def test_rfc_7677_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """RFC 7677 section 3, byte for byte (the server's nonce part fixed to the RFC's)."""
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    stored = credential("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServer("SCRAM-SHA-256", lambda mechanism, user: stored if user == "user" else None)
    assert server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                           b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=") == (
        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize(("mechanism", "hash_name"), [("SCRAM-SHA-256", "sha256"),
                                                      ("SCRAM-SHA-512", "sha512")])
def test_exchange_with_an_independent_client(mechanism: str, hash_name: str) -> None:
    stored = credential(mechanism, "s3cr=t,", 8192)
    server = ScramServer(mechanism, lambda m, user: stored if (m, user) == (mechanism, "al,i=ce") else None)
    client_exchange(server, hash_name, "al=2Ci=3Dce", "s3cr=t,")
    assert server.authorization_id == "al,i=ce"  # RFC 5802's saslname escapes


def test_wrong_password_unknown_user_and_bad_messages_are_sasl_exceptions() -> None:
    stored = credential("SCRAM-SHA-256", "right")
    lookup = {("SCRAM-SHA-256", "alice"): stored}.get

    def server() -> ScramServer:
        return ScramServer("SCRAM-SHA-256", lambda m, u: lookup((m, u)))

    with pytest.raises(MalformedResponse) as refused:
        client_exchange(server(), "sha256", "alice", "wrong")
    assert refused.value.reason == "Invalid client credentials"
    with pytest.raises(MalformedResponse, match="Invalid user credentials"):
        server().evaluate(b"n,,n=mallory,r=abc")
    with pytest.raises(MalformedResponse, match="Invalid user credentials"):  # delegation tokens: not served
        server().evaluate(b"n,,n=alice,r=abc,tokenauth=true")
    with pytest.raises(AuthenticationFailed, match="authorization id that is different"):
        server().evaluate(b"n,a=admin,n=alice,r=abc")
    for bad in (b"y,,n=alice,r=abc", b"p=tls-unique,,n=alice,r=abc", b"n,,n=alice", b"n,,n=al=ice,r=x",
                b"\xff", b"n,,n=,r=abc", b"n,a=,n=alice,r=abc",
                # ScramMessages' extensions: alphabetic names, non-empty values; a whole-message match
                b"n,,n=alice,r=abc,ext1=v", b"n,,n=alice,r=abc,tokenauth=", b"n,,n=alice,r=abc\n"):
        with pytest.raises(MalformedResponse):
            server().evaluate(bad)
    s = server()
    s.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(MalformedResponse, match="nonce"):
        s.evaluate(b"c=biws,r=abcdef,p=AAAA")


def test_the_authorization_id_is_checked_only_for_a_user_that_exists() -> None:
    """Kafka's ScramSaslServer looks the user up first: an unknown user with an authorization id
    gets the generic refusal (a SaslException), not the authorization id message."""
    stored = credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda m, u: stored if u == "alice" else None)
    with pytest.raises(MalformedResponse, match="Invalid user credentials"):
        server.evaluate(b"n,a=admin,n=mallory,r=abc")


def test_a_user_name_that_is_not_ascii_cannot_log_in() -> None:
    """Kafka's ScramMessages read a saslname of ASCII characters only: such a user's first message
    does not parse, even when a credential is stored for it."""
    stored = credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda m, u: stored)
    with pytest.raises(MalformedResponse, match="Invalid SCRAM client first message"):
        server.evaluate("n,,n=jos\u00e9,r=abc".encode())
    # bytes that are not UTF-8: read as Java reads them (U+FFFD, no ASCII saslname), the same refusal
    with pytest.raises(MalformedResponse) as refused:
        server.evaluate(b"n,,n=jos\xe9,r=abc")
    assert refused.value.reason == "Invalid SCRAM client first message"


def test_a_final_nonce_must_equal_the_combined_nonce() -> None:
    """Current Kafka's ScramSaslServer compares the final message's nonce with equals (3.9's and the
    trunk of Oct 2024 use endsWith, and accept more: docs/security.md lists it). librdkafka 2.0.2 (kcat
    1.7.1 here) sends client nonce + combined nonce, which equals refuses; librdkafka 2.16
    (confluent-kafka here) sends the combined nonce and logs in."""
    stored = credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda m, u: stored)
    combined = server.evaluate(b"n,,n=a,r=cnonce").decode().split(",")[0][2:]
    with pytest.raises(MalformedResponse, match="Invalid client nonce"):
        server.evaluate(f"c=biws,r=cnonce{combined},p=AAAA".encode())


def test_weak_stored_iterations_are_refused() -> None:
    weak = credential("SCRAM-SHA-512", "pw", iterations=1000)
    with pytest.raises(MalformedResponse, match="less than the minimum 4096"):
        ScramServer("SCRAM-SHA-512", lambda m, u: weak).evaluate(b"n,,n=a,r=abc")


def test_credential_text_is_kafkas() -> None:
    stored = ScramCredential(b"salt", b"stored", b"server", 4096)
    assert stored.to_kafka() == "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
    assert parse_credential(stored.to_kafka()) == stored
    for bad in ("", "salt=c2FsdA==", "salt=!!,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
                "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=many"):
        assert parse_credential(bad) is None


@given(st.lists(st.one_of(st.binary(max_size=40), st.sampled_from([
    b"n,,n=alice,r=abc", b"c=biws,r=abc", b"p=AAAA", b",", b"=",
    b"n,a=alice,n=alice,r=abc,ext=1"]).map(bytes)),
    min_size=1, max_size=3).map(lambda parts: b"".join(parts)), st.binary(max_size=60))
def test_any_scram_messages_answer_or_refuse(first: bytes, final: bytes) -> None:
    stored = credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda m, u: stored)
    try:
        server.evaluate(first)
        server.evaluate(final)
    except (MalformedResponse, AuthenticationFailed) as exc:
        assert exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not server.complete  # nothing random gets in


# --- the credential APIs and SCRAM listeners over raw sockets --------------------------------------

SASL = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(SASL) as b:
        yield b


def upsertion(name: str, mechanism: int, password: str, iterations: int = 4096) -> dict[str, object]:
    salt = secrets.token_bytes(16)
    hash_name = "sha256" if mechanism == SHA256 else "sha512"
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)}


def alter(address: str, deletions: list[dict[str, object]] | None = None,
          upsertions: list[dict[str, object]] | None = None) -> list[tuple[str, int, str | None]]:
    with KafkaSocket(address) as s:
        body = s.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                      {"deletions": deletions or [], "upsertions": upsertions or []}).body
    return [(r["user"], r["error_code"], r["error_message"]) for r in body["results"]]


def describe(address: str, users: list[str] | None = None) -> dict[str, object]:
    with KafkaSocket(address) as s:
        return dict(s.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                           {"users": None if users is None else [{"name": u} for u in users]}).body)


def scram_login(address: str, mechanism: str, user: str, password: str) -> int:
    """A SCRAM exchange over SaslHandshake/SaslAuthenticate: the last error code."""
    hash_name = "sha256" if mechanism.endswith("256") else "sha512"
    with KafkaSocket(address) as s:
        assert s.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}).body["error_code"] == ErrorCode.NONE
        first_bare = f"n={user},r=clientnonce"
        answer = s.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"n,,{first_bare}".encode()}).body
        if answer["error_code"]:
            return int(answer["error_code"])
        server_first = answer["auth_bytes"].decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", hash_name).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(hashlib.new(hash_name, client_key).digest(), auth_message, hash_name).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        final_message = f"{without_proof},p={proof}".encode()
        final = s.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": final_message}).body
        if final["error_code"] == ErrorCode.NONE:
            assert s.call(ApiKey.METADATA, 12, {"topics": None}).body["brokers"]  # authenticated
        return int(final["error_code"])


def test_upsert_describe_login_delete(broker: Broker) -> None:
    plain, sasl = broker.listeners["PLAINTEXT"], broker.listeners["SASL_PLAINTEXT"]
    both = [upsertion("carol", SHA256, "c-pw"), upsertion("carol", SHA512, "c-pw", 8192)]
    assert alter(plain, upsertions=both) == [("carol", ErrorCode.NONE, None)]
    described = describe(plain, ["carol"])
    assert described["error_code"] == ErrorCode.NONE
    assert described["results"] == [{"user": "carol", "error_code": ErrorCode.NONE, "error_message": None,
                                     "credential_infos": [{"mechanism": SHA256, "iterations": 4096},
                                                          {"mechanism": SHA512, "iterations": 8192}]}]
    assert scram_login(sasl, "SCRAM-SHA-256", "carol", "c-pw") == ErrorCode.NONE
    assert scram_login(sasl, "SCRAM-SHA-512", "carol", "c-pw") == ErrorCode.NONE
    assert scram_login(sasl, "SCRAM-SHA-512", "carol", "wrong") == ErrorCode.SASL_AUTHENTICATION_FAILED
    done = [("carol", ErrorCode.NONE, None)]
    assert alter(plain, deletions=[{"name": "carol", "mechanism": SHA256}]) == done
    assert scram_login(sasl, "SCRAM-SHA-256", "carol", "c-pw") == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert scram_login(sasl, "SCRAM-SHA-512", "carol", "c-pw") == ErrorCode.NONE
    assert alter(plain, deletions=[{"name": "carol", "mechanism": SHA512}]) == done
    assert "carol" not in [r["user"] for r in describe(plain)["results"]]  # none left: not listed
    (missing,) = describe(plain, ["carol"])["results"]
    assert (missing["error_code"], missing["error_message"]) == (
        ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: carol")


@pytest.mark.parametrize(("deletions", "upsertions", "expected"), [
    ([], [upsertion("u1", SHA256, "p", 4095)],
     ("u1", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")),
    ([], [upsertion("u1", SHA512, "p", 16385)],
     ("u1", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")),
    ([], [{**upsertion("u1", SHA256, "p"), "mechanism": 3}],
     ("u1", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
    ([], [upsertion("", SHA256, "p")], ("", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")),
    ([{"name": "u1", "mechanism": SHA256}], [],
     ("u1", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")),
    ([{"name": "u1", "mechanism": SHA256}], [upsertion("u1", SHA256, "p")],
     ("u1", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")),
    ([], [upsertion("u1", SHA256, "p"), upsertion("u1", SHA256, "q")],
     ("u1", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")),
    # An alteration's own problem wins over the same credential altered twice (Kafka's
    # AlterUserScramCredentialsRequestTest.testAlterEmptyUser, and ZkAdminManager's order).
    ([{"name": "", "mechanism": SHA256}] * 2, [upsertion("", SHA256, "p")],
     ("", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")),
    ([], [upsertion("u1", SHA256, "p", 100), upsertion("u1", SHA256, "q", 100)],
     ("u1", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")),
    ([{"name": "u1", "mechanism": 0}] * 2, [],
     ("u1", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
])
def test_alter_errors_are_kafkas_and_change_nothing(
        broker: Broker, deletions: list[dict[str, object]], upsertions: list[dict[str, object]],
        expected: tuple[str, int, str]) -> None:
    plain = broker.listeners["PLAINTEXT"]
    assert alter(plain, deletions, upsertions) == [expected]
    assert describe(plain, ["u1"])["results"][0]["error_code"] == ErrorCode.RESOURCE_NOT_FOUND


def test_one_users_error_does_not_stop_anothers(broker: Broker) -> None:
    plain = broker.listeners["PLAINTEXT"]
    assert alter(plain, upsertions=[upsertion("dave", SHA256, "p", 100), upsertion("erin", SHA256, "p")]) == [
        ("dave", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"), ("erin", ErrorCode.NONE, None)]
    results = {r["user"]: (r["error_code"], r["error_message"])
               for r in describe(plain, ["dave", "erin", "erin"])["results"]}
    assert results == {  # Kafka's messages name the user (ScramImage.describe, ZkAdminManager)
        "dave": (ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to describe a user credential that does not exist: dave"),
        "erin": (ErrorCode.DUPLICATE_RESOURCE,
                 "Cannot describe SCRAM credentials for the same user twice in a single request: erin")}


def test_credential_apis_need_cluster_alter_and_describe() -> None:
    config = {**SASL, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(config) as b:
        plain = b.listeners["PLAINTEXT"]
        # Kafka's AlterUserScramCredentialsRequest.getErrorResponse: every user named, sorted.
        assert alter(plain, [{"name": "gina", "mechanism": SHA256}],
                     [upsertion("frank", SHA256, "p"), upsertion("gina", SHA512, "p")]) == [
            ("frank", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None),
            ("gina", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)]
        assert describe(plain)["error_code"] == ErrorCode.NONE
    with Broker({**SASL, "authorizer.class.name": "allowlist"}) as b:
        assert describe(b.listeners["PLAINTEXT"])["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # DescribeUserScramCredentialsRequest.getErrorResponse: one result per name, without the name.
        refused = describe(b.listeners["PLAINTEXT"], ["frank", "gina"])
        assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert [(r["user"], r["error_code"]) for r in refused["results"]] == [
            ("", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)] * 2


def test_a_scram_failure_is_one_log_line(broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kafkapy"):
        assert scram_login(broker.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-256", "nobody", "x") == \
            ErrorCode.SASL_AUTHENTICATION_FAILED
    lines = [r for r in caplog.records if "Failed authentication" in r.getMessage()]
    assert len(lines) == 1 and "Invalid user credentials" in lines[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]
