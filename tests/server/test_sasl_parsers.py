"""The PLAIN token parser and the JAAS config parser: Kafka's answers for known inputs, and for any
input one of their documented errors, never anything else (Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode
from kafkapy.server.config import ConfigError
from kafkapy.server.sasl.jaas import JaasEntry, parse_jaas_config
from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse
from kafkapy.server.sasl.plain import PlainServer, parse_plain_token

KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_plain_token_fields() -> None:
    assert parse_plain_token(b"\0alice\0secret") == ("", "alice", "secret")
    assert parse_plain_token("admin\0admin\0pässwörd".encode()) == ("admin", "admin", "pässwörd")


@pytest.mark.parametrize(("token", "error", "message"), [
    (b"alice\0secret", MalformedResponse, "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0a\0b\0c", MalformedResponse, "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"", MalformedResponse, "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0\0secret", AuthenticationFailed, "Authentication failed: username not specified"),
    (b"\0alice\0", AuthenticationFailed, "Authentication failed: password not specified"),
])
def test_plain_token_errors(token: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as raised:
        parse_plain_token(token)
    assert str(raised.value).endswith(message)


@given(st.binary(max_size=64))
def test_any_plain_token_parses_or_is_refused(token: bytes) -> None:
    server = PlainServer({"alice": "secret"})
    try:
        assert server.evaluate(token) == b""
    except (AuthenticationFailed, MalformedResponse) as exc:
        assert exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED and not server.complete
    else:  # only the one right password gets through
        assert token in (b"\0alice\0secret", b"alice\0alice\0secret") and server.authorization_id == "alice"


def test_jaas_entry_as_kafka_documents_it() -> None:
    text = (f'{PLAIN_MODULE} required username="admin" password="a"\n'
            ' user_admin="a" user_alice="se;cr\\"et" user_bob=plainword;  ')
    assert parse_jaas_config(text, KEY) == JaasEntry(PLAIN_MODULE, "required", {
        "username": "admin", "password": "a", "user_admin": "a", "user_alice": 'se;cr"et',
        "user_bob": "plainword"})
    assert parse_jaas_config(f"{PLAIN_MODULE} OPTIONAL;", KEY).flag == "optional"


@pytest.mark.parametrize(("text", "problem"), [
    ("", "0 login modules"),
    (f"{PLAIN_MODULE} required user_a=\"b\"", "does not end with ';'"),
    (f"{PLAIN_MODULE} user_a=\"b\";", "control flag"),
    (f"{PLAIN_MODULE} required user_a=\"b;", "unterminated quoted value"),
    (f"{PLAIN_MODULE} required user_a;", "name=value"),
    (f"{PLAIN_MODULE} required =\"b\";", "name=value"),
    (f"{PLAIN_MODULE} required user_a=\"b\"; {PLAIN_MODULE} required;", "2 login modules"),
    (f"{PLAIN_MODULE} required user_a=\"b\" @;", "unexpected character '@'"),
    ("\"quoted\" required;", "login module class name"),
])
def test_malformed_jaas_is_one_line_naming_the_key(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_jaas_config(text, KEY)
    message = str(raised.value)
    assert KEY in message and problem in message and "\n" not in message


_JAAS_PIECES = st.sampled_from([PLAIN_MODULE, "required", "optional", "user_a", "=", ";", '"', '"x y"', "\\",
                                " ", "\n", "a.b", "@", "'", "=\"v\"", "user_b=\"c\"", ";;"])


@given(st.one_of(st.text(max_size=80), st.lists(_JAAS_PIECES, max_size=20).map("".join)))
def test_any_jaas_text_parses_or_is_one_config_error(text: str) -> None:
    try:
        entry = parse_jaas_config(text, KEY)
    except ConfigError as exc:
        assert KEY in str(exc) and "\n" not in str(exc)
    else:
        assert entry.flag in ("required", "requisite", "sufficient", "optional")
