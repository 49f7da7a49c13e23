"""SASL/OAUTHBEARER's parsers and server: RFC 7628's client message as Kafka's
OAuthBearerClientInitialResponse reads it, unsecured JWTs as OAuthBearerUnsecuredJws and its
validator check them (Kafka's reasons, in Kafka's order), the error challenge and the %x01 that
ends it; and for any input one of the documented errors, never anything else (Hypothesis)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode
from kafkapy.server.config import ConfigError
from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse
from kafkapy.server.sasl.oauthbearer import OAuthBearerServer, parse_client_initial_response
from kafkapy.server.sasl.unsecured_jws import (
    TokenRefused,
    UnsecuredValidator,
    make_unsecured_jws,
    parse_unsecured_jws,
)

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"


def b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def message(token: str, authzid: str = "", **extensions: str) -> bytes:
    """OAuthBearerClientInitialResponse.toBytes()'s layout."""
    pairs = "".join(f"\x01{k}={v}" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}{pairs}\x01\x01".encode()


ALICE = make_unsecured_jws({"sub": "alice", "exp": NOW_S + 3600, "iat": NOW_S, "scope": "read write"})


# --- the client's message --------------------------------------------------------------------

def test_client_message_fields() -> None:
    parsed = parse_client_initial_response(message(ALICE, "alice", traceId="abc 1", tenant="x"))
    assert (parsed.token, parsed.authorization_id) == (ALICE, "alice")
    assert parsed.extensions == {"traceId": "abc 1", "tenant": "x"}
    # The scheme is case-insensitive; more than one space may follow it.
    assert parse_client_initial_response(b"n,,\x01auth=bEaReR  t.k.\x01\x01").token == "t.k."


@pytest.mark.parametrize(("raw", "reason"), [
    (b"", "Invalid OAUTHBEARER client first message"),
    (b"y,,\x01auth=Bearer t\x01\x01", "Invalid OAUTHBEARER client first message"),  # channel binding
    (b"n,,\x01auth=Bearer t\x01", "Invalid OAUTHBEARER client first message"),  # one separator short
    (b"n,,\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01x=1\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Bearer a b\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic dXNlcg==\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
    (b"n,,\x01auth=Bearer t\x01tenant1=x\x01\x01", "Invalid OAUTHBEARER client first message"),  # letters
    (b"n,a=a,b,\x01auth=Bearer t\x01\x01", "Invalid OAUTHBEARER client first message"),  # ',' unescaped
    (b"n,,\x01auth=Bearer \xff\x01\x01", "Invalid OAUTHBEARER client first message"),  # not ASCII
])
def test_client_message_errors(raw: bytes, reason: str) -> None:
    with pytest.raises(MalformedResponse) as raised:
        parse_client_initial_response(raw)
    assert raised.value.reason == reason


@given(st.binary(max_size=96))
def test_any_client_message_parses_or_is_malformed(raw: bytes) -> None:
    try:
        parsed = parse_client_initial_response(raw)
    except MalformedResponse as exc:
        assert exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    else:
        assert parsed.token and "auth" not in parsed.extensions


@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20),
       st.dictionaries(st.from_regex(r"[A-Za-z]{1,8}", fullmatch=True).filter(lambda k: k != "auth"),
                       st.from_regex(r"[\x21-\x7E][\x21-\x7E ]{0,10}", fullmatch=True), max_size=3))
def test_messages_clients_make_parse_back(token: str, extensions: dict[str, str]) -> None:
    token = "".join(c for c in token if c.isalnum() or c in "-_~+/.") or "t"
    parsed = parse_client_initial_response(message(token, **extensions))
    assert (parsed.token, parsed.extensions) == (token, extensions)


# --- the unsecured JWS ------------------------------------------------------------------------

def test_token_claims_and_times() -> None:
    jws = parse_unsecured_jws(make_unsecured_jws({"sub": "alice", "exp": 1.5, "iat": 0.25,
                                                  "scope": ["a", " b ", ""], "n": True}))
    assert (jws.principal_name, jws.lifetime_ms, jws.start_time_ms) == ("alice", 1500, 250)
    assert jws.scope == {"a", "b"} and jws.claims["n"] == "true"  # Jackson's asText of a boolean
    # A principal claim other than "sub", and a scope claim given as one string.
    other = parse_unsecured_jws(make_unsecured_jws({"user": "bob", "exp": 1, "perms": " x y "}),
                                "user", "perms")
    assert (other.principal_name, other.scope) == ("bob", {"x y"})
    # Standard Base64 and padding are read too (Kafka's decoder takes them).
    padded = f"{b64({'alg': 'none'})}.{b64({'sub': 'a', 'exp': 1})}==."
    assert parse_unsecured_jws(padded).principal_name == "a"


@pytest.mark.parametrize(("token", "reason"), [
    ("a..b", "Malformed compact serialization contains '..'"),
    ("abc", "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"),
    (f"{b64({'alg': 'none'})}.{b64({'sub': 'a', 'exp': 1})}.x.",
     "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"),
    (f"!!.{b64({})}.", "malformed Base64 URL encoded value"),
    (f"{b64({'alg': 'none'})}.e30xx.", "malformed Base64 URL encoded value"),
    (f"{base64.b64encode(b'{').decode()}.{b64({})}.", "malformed JSON"),
    (f"{base64.b64encode(b'NaN').decode()}.{b64({})}.", "malformed JSON"),
    (f"{b64({})}.{b64({'sub': 'a', 'exp': 1})}.", "JWS header must have an Algorithm value"),
    (f"{b64({'alg': 'RS256'})}.{b64({'sub': 'a', 'exp': 1})}.",
     "Unsecured JWS must have 'none' for an algorithm"),
    (f"{b64({'alg': 'none'})}.{b64({'sub': 'a', 'exp': 1})}.c2ln",
     "Unsecured JWS must not contain a digital signature"),
    (make_unsecured_jws({"sub": "a", "exp": 1, "scope": 3}),
     "The 'scope' claim was not of type List: Integer"),
    (make_unsecured_jws({"sub": "a"}), "No expiration time in JWT"),
    (make_unsecured_jws({"sub": "a", "exp": "soon"}), "The 'exp' claim was not of type Number: String"),
    (make_unsecured_jws({"exp": 1}), "No principal name in JWT claim: sub"),
    (make_unsecured_jws({"sub": " ", "exp": 1}), "No principal name in JWT claim: sub"),
    (make_unsecured_jws({"sub": 7, "exp": 1}), "The 'sub' claim was not of type String: Integer"),
    (make_unsecured_jws({"sub": "a", "exp": 1, "iat": [1]}),
     "The 'iat' claim was not of type Number: ArrayList"),
])
def test_token_errors_in_kafkas_order(token: str, reason: str) -> None:
    with pytest.raises(TokenRefused) as raised:
        parse_unsecured_jws(token)
    assert raised.value.reason == reason and raised.value.status == "invalid_token"


@given(st.text(max_size=80))
def test_any_token_text_parses_or_is_refused(token: str) -> None:
    try:
        parse_unsecured_jws(token)
    except TokenRefused as exc:
        assert exc.reason and exc.scope is None


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                 max_size=3), max_leaves=8)


@given(st.dictionaries(st.sampled_from(["sub", "exp", "iat", "scope", "x"]), _JSON, max_size=5),
       st.integers(0, 2**40))
def test_any_claims_validate_or_are_refused(claims: dict[str, object], now_ms: int) -> None:
    """Whatever JSON the claims are (NaN, huge numbers, nested lists), one outcome or TokenRefused."""
    token = f"{b64({'alg': 'none'})}.{base64.urlsafe_b64encode(json.dumps(claims).encode()).decode()}."
    try:
        jws = UnsecuredValidator().validate(token, now_ms)
    except TokenRefused as exc:
        assert exc.status == "invalid_token"
    else:
        assert jws.principal_name.strip() and now_ms < jws.lifetime_ms + 1


# --- the validator's checks -------------------------------------------------------------------

def token(**claims: object) -> str:
    return make_unsecured_jws({"sub": "alice", **claims})


@pytest.mark.parametrize(("claims", "skew", "reason"), [
    ({"exp": NOW_S}, 0, f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or after "
                        f"the Expiration Time value ({NOW_S:f} seconds)"),
    ({"exp": NOW_S + 10, "iat": NOW_S + 1}, 0,
     f"The Issued At value ({NOW_S + 1:f} seconds) was after the indicated time ({NOW_MS} ms) plus "
     "allowable clock skew (0 ms)"),
    ({"exp": NOW_S - 5, "iat": NOW_S - 5}, 10_000,
     f"The Expiration Time time ({NOW_S - 5:f} seconds) was not after the Issued At time "
     f"({NOW_S - 5:f} seconds)"),
])
def test_times_are_checked_at_the_brokers_clock(claims: dict[str, object], skew: int, reason: str) -> None:
    with pytest.raises(TokenRefused) as raised:
        UnsecuredValidator(allowable_clock_skew_ms=skew).validate(token(**claims), NOW_MS)
    assert raised.value.reason == reason


def test_clock_skew_lets_a_token_just_past_its_expiry_through() -> None:
    validator = UnsecuredValidator(allowable_clock_skew_ms=1000)
    assert validator.validate(token(exp=NOW_S), NOW_MS).principal_name == "alice"
    with pytest.raises(TokenRefused):
        validator.validate(token(exp=NOW_S), NOW_MS + 1000)


def test_required_scope() -> None:
    validator = UnsecuredValidator(required_scope=("read", "admin"))
    both = token(exp=NOW_S + 1, scope=["admin", "read"])
    assert validator.validate(both, NOW_MS).scope == {"admin", "read"}
    with pytest.raises(TokenRefused) as raised:
        validator.validate(token(exp=NOW_S + 1, scope="read"), NOW_MS)
    assert raised.value.status == "insufficient_scope" and raised.value.scope == "[read, admin]"


def test_validator_from_jaas_options() -> None:
    assert UnsecuredValidator.from_jaas_options({}, KEY) == UnsecuredValidator()
    assert UnsecuredValidator.from_jaas_options({
        "unsecuredValidatorPrincipalClaimName": " user ", "unsecuredValidatorScopeClaimName": "perms",
        "unsecuredValidatorRequiredScope": "a  b", "unsecuredValidatorAllowableClockSkewMs": " 30 ",
        "unsecuredLoginStringClaim_sub": "ignored"}, KEY) == UnsecuredValidator("user", "perms", ("a", "b"),
                                                                                   30)


@pytest.mark.parametrize(("options", "problem"), [
    ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "must be a non-negative int, not '-1'"),
    ({"unsecuredValidatorAllowableClockSkewMs": "soon"}, "must be a non-negative int, not 'soon'"),
    ({"unsecuredValidatorAllowableClockSkewMs": "9999999999"}, "non-negative int"),
    ({"unsecuredValidatorRequiredScope": 'a "b"'}, 'invalid scope value: "b"'),
])
def test_validator_options_kafka_refuses(options: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=KEY) as raised:
        UnsecuredValidator.from_jaas_options(options, KEY)
    assert problem in str(raised.value)


# --- the server: success, the error challenge, %x01 ------------------------------------------------

def server(validator: UnsecuredValidator | None = None, now_ms: int = NOW_MS) -> OAuthBearerServer:
    return OAuthBearerServer(validator or UnsecuredValidator(), lambda: now_ms)


def test_valid_token_completes_with_the_principal_and_expiry() -> None:
    s = server()
    assert s.evaluate(message(ALICE, traceId="t")) == b""
    assert s.complete and s.authorization_id == "alice" and s.extensions == {"traceId": "t"}
    assert s.credential_expiry_ms == (NOW_S + 3600) * 1000
    with pytest.raises(MalformedResponse):
        s.evaluate(message(ALICE))


def test_refused_token_gets_the_error_challenge_then_fails_on_control_a() -> None:
    s = server(now_ms=(NOW_S + 3600) * 1000)  # the token has just expired
    assert s.evaluate(message(ALICE)) == b'{"status":"invalid_token"}' and not s.complete
    with pytest.raises(AuthenticationFailed) as raised:
        s.evaluate(b"\x01")
    assert raised.value.message == '{"status":"invalid_token"}'


def test_insufficient_scope_challenge_names_the_scope() -> None:
    s = server(UnsecuredValidator(required_scope=("admin",)))
    assert s.evaluate(message(ALICE)) == b'{"status":"insufficient_scope", "scope":"[admin]"}'


def test_control_a_without_an_error_is_a_malformed_message() -> None:
    with pytest.raises(MalformedResponse):
        server().evaluate(b"\x01")


def test_after_an_error_challenge_a_new_token_may_follow() -> None:
    """OAuthBearerSaslServer forgets the error when anything but %x01 follows it."""
    s = server(UnsecuredValidator(required_scope=("admin",)))
    assert s.evaluate(message(ALICE)).startswith(b'{"status"')
    assert s.evaluate(message(token(exp=NOW_S + 1, scope="admin"))) == b"" and s.complete


def test_authorization_id_must_be_the_principal() -> None:
    with pytest.raises(AuthenticationFailed) as raised:
        server().evaluate(message(ALICE, "bob"))
    assert raised.value.message == ("Authentication failed: Client requested an authorization id (bob) that "
                                    "is different from the token's principal name (alice)")
