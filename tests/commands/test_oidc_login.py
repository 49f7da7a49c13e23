"""The CLI tools log in with tokens from an OAuth/OIDC provider, as Kafka's tools do with
OAuthBearerLoginCallbackHandler (KIP-768): a broker checking signed tokens against the test's
identity provider (tests/oidc_provider.py: JWKS and client_credentials token endpoint over https),
and ``kafkapy topics``/``produce``/``consume`` run as real processes with a ``--command-config``
file a Java tool takes as it is. The provider's refusals, an unreachable or untrusted endpoint and
tokens that fail Kafka's client-side checks are one-line errors with exit code 1."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from oidc_provider import CLIENTS, IdentityProvider, broker_config

from kafkapy import Broker
from kafkapy.client import ClientError
from kafkapy.commands._oidc_login import (
    OidcLogin,
    format_authorization_header,
    format_error_message,
    format_request_body,
    validate_login_token,
)
from kafkapy.commands._security import security_options
from kafkapy.server.sasl.unsecured_jws import make_unsecured_jws
from kafkapy.testing import BrokerFactory

pytest.importorskip("trustme")

TIMEOUT_S = 30
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture
def oidc_broker(idp: IdentityProvider, kafka_broker_factory: BrokerFactory) -> Broker:
    # An ACL authorizer with no ACLs: only the super user sees and uses topics, so what a command
    # sees says which principal the broker made of its token.
    broker = kafka_broker_factory(broker_config(idp, **{"authorizer.class.name": "acl",
                                                        "super.users": "User:svc-orders;User:file-user"}))
    broker.seed({"orders": {"partitions": 1}})
    return broker


def command_config(tmp_path: Path, idp: IdentityProvider, *, client_id: str = "svc-orders",
                   secret: str | None = None, url: str | None = None, trust: bool = True,
                   handler: str = LOGIN_HANDLER, extra: str = "") -> str:
    """The properties file a Java tool (kafka-topics.sh --command-config) takes for an OIDC login:
    the JAAS entry carries the client credentials, the scope and the token endpoint's trust store."""
    trust_options = ('\\\n    ssl.truststore.type="PEM" '
                     f'ssl.truststore.location="{idp.ca_file}"' if trust else "")
    path = tmp_path / "oidc-client.properties"
    path.write_text(
        "# kafka-topics.sh --command-config oidc-client.properties\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=OAUTHBEARER\n"
        f"sasl.login.callback.handler.class={handler}\n"
        f"sasl.oauthbearer.token.endpoint.url={url or idp.url + '/token'}\n"
        f"sasl.jaas.config={LOGIN_MODULE} required \\\n"
        f'    clientId="{client_id}" clientSecret="{secret or CLIENTS[client_id]}" scope="kafka" '
        f"{trust_options};\n{extra}")
    return str(path)


def kafkapy(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkapy.cli", *args], input=stdin.decode(),
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for part in parts:
        assert part in result.stderr, result.stderr


def test_topics_produce_and_consume_log_in_through_the_token_endpoint(
        oidc_broker: Broker, idp: IdentityProvider, tmp_path: Path) -> None:
    """Each command fetches one token (client_credentials, HTTP Basic, the scope in the form body,
    exactly as Kafka encodes them) and the broker accepts it as User:<client id>."""
    config = command_config(tmp_path, idp)
    bs = oidc_broker.bootstrap_servers
    listed = kafkapy("topics", "--bootstrap-server", bs, "--command-config", config, "--list")
    assert (listed.returncode, listed.stderr, listed.stdout.split()) == (0, "", ["orders"])
    produced = kafkapy("produce", "-b", bs, "--command-config", config, "-t", "orders", "-K", ":",
                       stdin=b"k1:one\nk2:two\n")
    assert (produced.returncode, produced.stderr) == (0, ""), produced
    consumed = kafkapy("consume", "-b", bs, "--command-config", config, "-t", "orders", "-o", "beginning",
                       "-e", "-K", "=")
    assert (consumed.returncode, consumed.stdout.split()) == (0, ["k1=one", "k2=two"]), consumed
    basic = "Basic " + base64.b64encode(b"svc-orders:orders-secret").decode()
    assert idp.token_posts == [(basic, "grant_type=client_credentials&scope=kafka")] * 3
    # Another client of the provider logs in too, as User:alice, who may see no topic.
    alice = kafkapy("topics", "--bootstrap-server", bs, "--command-config",
                    command_config(tmp_path, idp, client_id="alice"), "--list")
    assert (alice.returncode, alice.stderr, alice.stdout.split()) == (0, "", [])


def test_a_wrong_client_secret_is_the_providers_401_in_one_line(
        oidc_broker: Broker, idp: IdentityProvider, tmp_path: Path) -> None:
    """401 is final for Kafka's retriever: one request, and the provider's error in the message."""
    config = command_config(tmp_path, idp, secret="wrong")
    result = kafkapy("topics", "--bootstrap-server", oidc_broker.bootstrap_servers,
                     "--command-config", config, "--list")
    assert_one_line_error(result, f"no token from {idp.url}/token",
                          'The response code 401 and error response {"invalid_client" - "client '
                          'authentication failed"} was encountered reading the token endpoint response')
    assert len(idp.token_posts) == 1
    assert not oidc_broker.connections()  # no token, no connection


def test_an_untrusted_or_unreachable_endpoint_is_one_line(
        oidc_broker: Broker, idp: IdentityProvider, tmp_path: Path) -> None:
    """Without the JAAS trust store the provider's certificate is not trusted (the tool's own
    ssl.truststore.* are for the broker, as in Kafka); a closed port is retried for
    sasl.login.retry.backoff.max.ms, then named."""
    bs = ("--bootstrap-server", oidc_broker.bootstrap_servers)
    untrusted = command_config(tmp_path, idp, trust=False, extra="sasl.login.retry.backoff.max.ms=300\n")
    assert_one_line_error(kafkapy("topics", *bs, "--command-config", untrusted, "--list"),
                          "CERTIFICATE_VERIFY_FAILED")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unreachable = command_config(tmp_path, idp, url=f"https://127.0.0.1:{port}/token",
                                 extra="sasl.login.retry.backoff.max.ms=300\n")
    assert_one_line_error(kafkapy("topics", *bs, "--command-config", unreachable, "--list"),
                          f"no token from https://127.0.0.1:{port}/token: Connection refused")


def test_a_token_from_a_file(oidc_broker: Broker, idp: IdentityProvider, tmp_path: Path) -> None:
    """A file: token endpoint is read as it is (the deprecated ``secured.`` handler name works too):
    a signed token logs in; an expired one is the broker's invalid_token, with the expiry named; an
    unsigned one fails Kafka's three-section check before any connection."""
    token_file = tmp_path / "token.jwt"
    bs = ("--bootstrap-server", oidc_broker.bootstrap_servers)
    handler = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
    config = command_config(tmp_path, idp, url=token_file.as_uri(), handler=handler)
    token_file.write_text(idp.token("file-user") + "\n")
    listed = kafkapy("topics", *bs, "--command-config", config, "--list")
    assert (listed.returncode, listed.stderr, listed.stdout.split()) == (0, "", ["orders"])  # a super user
    token_file.write_text(idp.token("file-user", lifetime_s=-120))
    assert_one_line_error(kafkapy("topics", *bs, "--command-config", config, "--list"),
                          '{"status":"invalid_token"}', f"(the token from {token_file.as_uri()} expired at ")
    unsigned = make_unsecured_jws({"sub": "file-user", "exp": 4102444800})
    token_file.write_text(unsigned)
    assert_one_line_error(kafkapy("topics", *bs, "--command-config", config, "--list"),
                          f"Malformed JWT provided ({unsigned}); expected three sections (header, payload, "
                          "and signature), but 2 sections provided")
    assert idp.token_posts == []


def test_the_client_side_claim_checks_use_the_configured_claim_names(
        oidc_broker: Broker, idp: IdentityProvider, tmp_path: Path) -> None:
    """sasl.oauthbearer.sub.claim.name names the subject claim the tool insists on, as Kafka's
    LoginAccessTokenValidator does: the provider's token has no ``client_id`` claim."""
    config = command_config(tmp_path, idp, extra="sasl.oauthbearer.sub.claim.name=client_id\n")
    result = kafkapy("topics", "--bootstrap-server", oidc_broker.bootstrap_servers,
                     "--command-config", config, "--list")
    assert_one_line_error(result,
                          f"the token from {idp.url}/token is refused: client_id value must be non-null")
    assert not oidc_broker.connections()


# --- configuration refusals (no provider needed) -------------------------------------------------

def _properties(**extra: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": LOGIN_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": "https://idp.invalid/token",
            "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="c" clientSecret="s";', **extra}


@pytest.mark.parametrize(("extra", "message"), [
    ({"sasl.oauthbearer.token.endpoint.url": ""},
     "The OAuth configuration option sasl.oauthbearer.token.endpoint.url value must be non-null"),
    ({"sasl.oauthbearer.token.endpoint.url": "ftp://idp/token"},
     'contains an invalid protocol (ftp); only "http", "https", and "file" protocol are supported'),
    ({"sasl.oauthbearer.token.endpoint.url": "file:///no/such/token"}, "(/no/such/token) that doesn't exist"),
    ({"sasl.jaas.config": f'{LOGIN_MODULE} required clientSecret="s";'},
     "The OAuth configuration option clientId value must be non-null"),
    ({"sasl.jaas.config": f'{LOGIN_MODULE} required clientId="c" clientSecret=" ";'},
     "The OAuth configuration option clientSecret value must not contain only whitespace"),
    ({"sasl.jaas.config": f'{LOGIN_MODULE} required clientId="c" clientSecret="s" extension_a1="x";'},
     "Extension name a1 is invalid"),
    ({"sasl.jaas.config": f'{LOGIN_MODULE} required clientId="c" clientSecret="s" '
                          'ssl.truststore.type="JKS" ssl.truststore.location="/x.jks";'},
     "kafkapy reads PEM trust stores only"),
    ({"sasl.login.retry.backoff.ms": "500", "sasl.login.retry.backoff.max.ms": "100"},
     "sasl.login.retry.backoff.max.ms (100) is less than sasl.login.retry.backoff.ms (500)"),
    ({"sasl.login.read.timeout.ms": "soon"}, "sasl.login.read.timeout.ms is not a whole number"),
    ({"sasl.oauthbearer.sub.claim.name": " "}, "sasl.oauthbearer.sub.claim.name value must not contain only"),
    ({"sasl.login.callback.handler.class": "com.example.MyHandler"},
     "sasl.login.callback.handler.class com.example.MyHandler is not one kafkapy's tools can run"),
    ({"sasl.jaas.config": ""}, "needs sasl.jaas.config with the clientId and clientSecret options"),
])
def test_bad_oidc_login_settings_are_refused_naming_the_setting(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ClientError) as raised:
        security_options(_properties(**extra), "client.properties")
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert str(raised.value).startswith("client.properties: ")


def test_the_login_settings_take_kafkas_defaults() -> None:
    login = OidcLogin.from_properties(_properties(), {"clientId": "c", "clientSecret": "s"}, "p")
    endpoint = login.endpoint
    assert endpoint is not None
    assert (endpoint.retry_backoff_ms, endpoint.retry_backoff_max_ms) == (100, 10_000)
    assert (endpoint.connect_timeout_s, endpoint.read_timeout_s) == (10.0, 10.0)
    assert (login.sub_claim_name, login.scope_claim_name) == ("sub", "scope")


# --- the encodings and checks, with Kafka's own test vectors -------------------------------------

def test_the_authorization_header_and_body_are_encoded_as_kafka_encodes_them() -> None:
    assert format_authorization_header("id", "secret") == "Basic aWQ6c2VjcmV0"
    secret = '9Q|0`8i~ute-n9ksjLWb\\50"AX@UUED5E'
    assert format_authorization_header("SOME_RANDOM_LONG_USER_01234", secret) == (
        "Basic U09NRV9SQU5ET01fTE9OR19VU0VSXzAxMjM0OjlRfDBgOGl+dXRlLW45a3NqTFdiXDUwIkFYQFVVRUQ1RQ==")
    # sasl.oauthbearer.header.urlencode=true: RFC 6749 section 2.3.1's form-encoding first.
    assert format_authorization_header("user!@~'", "secret-(*)!", urlencode=True) == (
        "Basic dXNlciUyMSU0MCU3RSUyNzpzZWNyZXQtJTI4KiUyOSUyMQ==")
    assert format_request_body("scope") == "grant_type=client_credentials&scope=scope"
    assert format_request_body("earth is great!") == "grant_type=client_credentials&scope=earth+is+great%21"
    assert format_request_body("what on earth?!?!?") == (
        "grant_type=client_credentials&scope=what+on+earth%3F%21%3F%21%3F")
    assert format_request_body(None) == format_request_body("  ") == "grant_type=client_credentials"


def test_the_providers_error_answer_is_shown_as_kafka_shows_it() -> None:
    assert format_error_message('{"error":"some_arg", "error_description":"some problem with arg"}') == (
        '{"some_arg" - "some problem with arg"}')
    assert format_error_message('{"errorCode":"some_arg", "errorSummary":"some problem with arg"}') == (
        '{"some_arg" - "some problem with arg"}')
    assert format_error_message('{"err":"some_arg"}') == '{"err":"some_arg"}'
    assert format_error_message("non json error output") == "{non json error output}"
    assert format_error_message("") == "{}"


def _jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


@pytest.mark.parametrize(("token", "message"), [
    ("", "Empty JWT provided"),
    ("a.b", "expected three sections (header, payload, and signature), but 2 sections provided"),
    ("a. .c", "but payload section missing"),
    ("a.!!.c", "malformed Base64 URL encoded value"),
    (_jwt({"sub": "s"}), "exp value must be non-null"),
    (_jwt({"exp": 1}), "sub value must be non-null"),
    (_jwt({"exp": -1, "sub": "s"}), 'exp value must be non-negative; value given was "-1000"'),
    (_jwt({"exp": 1, "sub": " "}), "sub value must not contain only whitespace"),
    (_jwt({"exp": 1, "sub": "s", "iat": -5}),
     'iat value must be null or non-negative; value given was "-5000"'),
    (_jwt({"exp": 1, "sub": "s", "scope": ["a", "a"]}),
     "scope value must not contain duplicates - a already"),
    (_jwt({"exp": "soon", "sub": "s"}), "exp value must be a number"),
])
def test_tokens_failing_kafkas_login_checks(token: str, message: str) -> None:
    with pytest.raises(ValueError, match=None) as raised:
        validate_login_token(token)
    assert message in str(raised.value)


def test_a_token_passing_the_login_checks() -> None:
    token = validate_login_token(f" {_jwt({'exp': 2.9, 'iat': 1, 'sub': 's', 'scope': 'kafka'})}\n")
    assert (token.expiration_ms, token.issued_at_ms, token.subject, token.scopes) == (2000, 1000, "s",
                                                                                     frozenset({"kafka"}))
    other_names = validate_login_token(_jwt({"exp": 1, "user": "u", "scp": ["a", "b"]}), "user", "scp")
    assert (other_names.subject, other_names.scopes) == ("u", {"a", "b"})


CLAIM_VALUES = st.none() | st.integers() | st.floats() | st.text() | st.lists(st.text(max_size=3))


@given(st.text(max_size=300)
       | st.builds(_jwt, st.dictionaries(st.sampled_from(["exp", "sub", "iat", "scope"]), CLAIM_VALUES)))
# The message quotes the token as Kafka's does, trimmed: a newline inside it is the token's own (the
# test compared with the untrimmed token, and failed at 20x examples). Java trims \x00 (Python's
# strip() did not) and leaves U+2028 (Python's strip() took it).
@example("0\n0 ")
@example("\x00a.b.c")
@example("\u2028a.b.c\u2028")
def test_the_login_checks_take_any_text_without_crashing(token: str) -> None:
    try:
        validate_login_token(token)
    except ValueError as exc:
        assert "\n" not in str(exc).replace(token.strip("".join(map(chr, range(0x21)))), "")


# --- retries and refreshes, against the provider ---------------------------------------------------

def _endpoint_login(idp: IdentityProvider, now_ms: Any = None, **extra: str) -> OidcLogin:
    properties = _properties(**{"sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token", **extra})
    options = {"clientId": "svc-orders", "clientSecret": CLIENTS["svc-orders"], "scope": "kafka",
               "ssl.truststore.type": "PEM", "ssl.truststore.location": str(idp.ca_file)}
    if now_ms is None:
        return OidcLogin.from_properties(properties, options, "p")
    return OidcLogin.from_properties(properties, options, "p", now_ms)


def test_a_provider_outage_is_retried_and_a_final_status_is_not(idp: IdentityProvider) -> None:
    """503 is worth another try (Kafka retries any status it does not know to be final); once the
    retries are spent the first failure is named."""
    idp.outages = [503, 503]
    assert _endpoint_login(idp).token().subject == "svc-orders"
    assert len(idp.token_posts) == 3
    idp.outages, idp.token_posts = [500] * 100, []
    with pytest.raises(ClientError) as raised:
        _endpoint_login(idp, **{"sasl.login.retry.backoff.max.ms": "300"}).token()
    assert ('The unexpected response code 500 and error message {"temporarily_unavailable" - } was '
            "encountered reading the token endpoint response") in str(raised.value)
    assert 2 <= len(idp.token_posts) <= 3  # waits of 100 then 200 ms fit in 300 ms on a quick machine
    idp.outages, idp.token_posts = [403], []
    with pytest.raises(ClientError, match=r"response code 403 .* will not attempt further retries"):
        _endpoint_login(idp).token()
    assert len(idp.token_posts) == 1


def test_a_token_is_shared_until_80_percent_of_its_lifetime_has_passed(idp: IdentityProvider) -> None:
    """Every connection of a command uses the token held; a connection opened after 80% of its
    lifetime (Kafka's default refresh window factor) gets a new one."""
    idp.token_lifetime_s = 100
    clock = [time.time() * 1000]
    login = _endpoint_login(idp, lambda: clock[0])
    first = login.token()
    clock[0] += 70_000
    assert login.token() is first and len(idp.token_posts) == 1
    clock[0] += 15_000
    assert login.token() is not first and len(idp.token_posts) == 2
