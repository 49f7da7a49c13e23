"""Signed OAUTHBEARER tokens (KIP-768) as Kafka's OAuthBearerValidatorCallbackHandler checks them:
every algorithm jose4j verifies, key selection by kid and type, jose4j's claim rules (exp/iat
required, nbf, clock skew, aud/iss), Kafka's own (sub, scope), the JWKS sources (a file read once,
an http endpoint refreshed early for an unknown kid), the settings that select the validator; and
for any input an accepted token or a TokenRefused, never anything else (Hypothesis)."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.sasl import base64url
from kafkapy.server.sasl.jwks import ALGORITHMS, FileJwks, HttpJwks, KeySource, parse_jwks, public_jwk
from kafkapy.server.sasl.oauthbearer import OAuthBearerServer
from kafkapy.server.sasl.settings import SIGNED_VALIDATOR, sasl_settings
from kafkapy.server.sasl.signed_jws import SignedValidator, make_signed_jws
from kafkapy.server.sasl.unsecured_jws import TokenRefused, UnsecuredValidator, make_unsecured_jws

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEYS = {alg: ec.generate_private_key(curve()) for alg, curve in
           (("ES256", ec.SECP256R1), ("ES384", ec.SECP384R1), ("ES512", ec.SECP521R1))}
ED_KEY = ed25519.Ed25519PrivateKey.generate()
HMAC_SECRET = b"s" * 64
CLAIMS = {"sub": "alice", "exp": NOW_S + 3600, "iat": NOW_S, "scope": "kafka"}


class StaticKeys(KeySource):
    """Keys held in memory; ``asked`` records the kids a validator found no key for."""

    location = "memory"

    def __init__(self, *jwks: dict[str, Any]) -> None:
        self._keys = parse_jwks(json.dumps({"keys": list(jwks)}), self.location)
        self.asked: list[str | None] = []

    @property
    def keys(self) -> Any:
        return self._keys

    def missing(self, kid: str | None) -> None:
        self.asked.append(kid)


KEYS = StaticKeys(public_jwk(RSA_KEY, "rsa"), public_jwk(ED_KEY, "ed"), public_jwk(HMAC_SECRET, "hmac"),
                  *(public_jwk(key, alg) for alg, key in EC_KEYS.items()))


def validator(**options: Any) -> SignedValidator:
    return SignedValidator(options.pop("keys", KEYS), **options)


def signed(claims: dict[str, Any] | None = None, key: Any = RSA_KEY, alg: str = "RS256",
           kid: str | None = "rsa", **changes: Any) -> str:
    return make_signed_jws({**CLAIMS, **(claims or {}), **changes}, key, alg, kid)


def refusal(token: str, **options: Any) -> str:
    with pytest.raises(TokenRefused) as refused:
        validator(**options).validate(token, NOW_MS)
    assert refused.value.status == "invalid_token" and refused.value.scope is None
    return refused.value.reason


@pytest.mark.parametrize(("alg", "key", "kid"), [
    *((alg, RSA_KEY, "rsa") for alg in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")),
    *((alg, key, alg) for alg, key in EC_KEYS.items()),
    ("EdDSA", ED_KEY, "ed"),
    *((alg, HMAC_SECRET, "hmac") for alg in ("HS256", "HS384", "HS512")),
])
def test_every_algorithm_kafka_accepts_verifies(alg: str, key: Any, kid: str) -> None:
    token = validator().validate(signed(key=key, alg=alg, kid=kid), NOW_MS)
    assert (token.principal_name, token.scope) == ("alice", frozenset({"kafka"}))
    assert (token.lifetime_ms, token.start_time_ms) == ((NOW_S + 3600) * 1000, NOW_S * 1000)
    # Without a kid, every key of the algorithm's type is tried.
    assert validator().validate(signed(key=key, alg=alg, kid=None), NOW_MS).principal_name == "alice"


def test_a_tampered_token_or_another_key_fails_the_signature() -> None:
    header, _, signature = signed().split(".")
    forged = base64.urlsafe_b64encode(json.dumps({**CLAIMS, "sub": "admin"}).encode()).rstrip(b"=").decode()
    assert "signature check failed" in refusal(f"{header}.{forged}.{signature}")
    assert "signature check failed" in refusal(signed(key=OTHER_RSA_KEY))


def test_alg_none_and_unknown_algorithms_are_refused() -> None:
    assert "'none' is not a permitted algorithm" in refusal(make_unsecured_jws(CLAIMS) + "c2ln")
    assert "'none' is not a permitted algorithm" in refusal(signed(alg="RS256").replace(
        signed(alg="RS256").split(".")[0], base64.urlsafe_b64encode(b'{"alg":"none"}').decode().rstrip("=")))
    header = base64.urlsafe_b64encode(b'{"alg":"XS256"}').decode().rstrip("=")
    assert "not one of" in refusal(f"{header}.e30.c2ln")


def test_an_unknown_kid_is_refused_and_asks_for_a_refresh() -> None:
    keys = StaticKeys(public_jwk(RSA_KEY, "rsa"))
    assert "no key in the JWKS" in refusal(signed(kid="rotated"), keys=keys)
    assert keys.asked == ["rotated"]


def test_keys_of_the_wrong_type_use_or_alg_do_not_verify() -> None:
    for jwk in (public_jwk(RSA_KEY, "rsa", use="enc"), public_jwk(RSA_KEY, "rsa", alg="PS256"),
                public_jwk(EC_KEYS["ES384"], "rsa")):
        assert "no key in the JWKS" in refusal(signed(), keys=StaticKeys(jwk))


def test_small_rsa_and_hmac_keys_are_refused() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    assert "too small" in refusal(signed(key=small), keys=StaticKeys(public_jwk(small, "rsa")))
    short = b"k" * 16
    assert "at least 256 bits" in refusal(signed(key=short, alg="HS256", kid="h"),
                                          keys=StaticKeys(public_jwk(short, "h")))


@pytest.mark.parametrize(("changes", "options", "reason"), [
    ({"exp": NOW_S - 31}, {}, "the JWT has expired"),
    ({"exp": None}, {}, "no Expiration Time (exp) claim"),
    ({"iat": None}, {}, "no Issued At (iat) claim"),
    ({"exp": "soon"}, {}, "the 'exp' claim is not a number"),
    ({"nbf": NOW_S + 31}, {}, "the JWT is not valid yet"),
    ({"aud": "kafka"}, {}, "holds none of the expected audiences []"),
    ({"aud": ["web"]}, {"expected_audience": ("kafka",)}, "holds none of the expected audiences ['kafka']"),
    ({}, {"expected_audience": ("kafka",)}, "no Audience (aud) claim"),
    ({"iss": "https://evil"}, {"expected_issuer": "https://idp"}, "is not the expected 'https://idp'"),
    ({}, {"expected_issuer": "https://idp"}, "no Issuer (iss) claim"),
    ({"sub": None}, {}, "sub value must be non-null"),
    ({"sub": "  "}, {}, "sub value must not contain only whitespace"),
    ({"sub": 7}, {}, "Could not extract the 'sub' claim"),
    ({"scope": ["a", "a"]}, {}, "scope value must not contain duplicates - a already present"),
    ({"scope": ""}, {}, "scope value must be non-empty"),
    ({"exp": -1, "iat": -5}, {"clock_skew_s": 2**31 - 1}, 'exp value must be non-negative'),
    ({"exp": 2**63 // 1000 + 1}, {}, 'exp value must be non-negative'),  # * 1000 wraps in a Java long
    ({"iat": -1}, {}, 'iat value must be null or non-negative; value given was "-1000"'),
])
def test_claims_are_checked_as_kafka_checks_them(changes: dict[str, Any], options: dict[str, Any],
                                                 reason: str) -> None:
    claims = {k: v for k, v in {**CLAIMS, **changes}.items() if v is not None}
    assert reason in refusal(make_signed_jws(claims, RSA_KEY, "RS256", "rsa"), **options)


def test_clock_skew_and_what_is_accepted() -> None:
    assert validator().validate(signed(exp=NOW_S - 29), NOW_MS).principal_name == "alice"  # 30 s skew
    assert validator().validate(signed(nbf=NOW_S + 29), NOW_MS).principal_name == "alice"
    assert "expired" in refusal(signed(exp=NOW_S - 1), clock_skew_s=0)
    token = validator(expected_audience=("kafka", "other"), expected_issuer="https://idp").validate(
        signed(aud=["web", "kafka"], iss="https://idp", sub=" bob ", scope=["read", "write"]), NOW_MS)
    assert (token.principal_name, token.scope) == ("bob", frozenset({"read", "write"}))
    # Custom claim names (sasl.oauthbearer.sub.claim.name, .scope.claim.name); a scope of no string
    # or list type is no scope.
    token = validator(sub_claim_name="client_id", scope_claim_name="scp").validate(
        signed(client_id="svc", scp="admin", scope=5), NOW_MS)
    assert (token.principal_name, token.scope) == ("svc", frozenset({"admin"}))
    assert validator().validate(signed(scope=5), NOW_MS).scope == frozenset()


@pytest.mark.parametrize(("token", "reason"), [
    ("", "Empty JWT provided"),
    ("  ", "Empty JWT provided"),
    ("a.b", "but 2 sections provided"),
    ("a.b.c.", "a JWS has 3 parts, not 4"),  # Java's split drops the trailing section; jose4j does not
    ("a. .c", "the payload section is missing"),
    ("!!.e30.c2ln", "the JWS header is not Base64URL-encoded JSON"),
    ("W10.e30.c2ln", "the JWS header is not a JSON object"),  # []
    (base64.urlsafe_b64encode(b'{"alg":"RS256","alg":"none"}').decode().rstrip("=") + ".e30.c2ln",
     "appears twice"),
    ("e30.e30.c2ln", "the JWS header has no 'alg'"),
])
def test_malformed_tokens(token: str, reason: str) -> None:
    assert reason in refusal(token)


def test_a_payload_that_is_not_ascii_is_refused() -> None:
    header, _, signature = signed().split(".")
    assert "signature check failed" in refusal(f"{header}.é30.{signature}")


def test_the_exchange_tells_the_client_invalid_token() -> None:
    server = OAuthBearerServer(validator(), lambda: NOW_MS)
    challenge = server.evaluate(f"n,,\x01auth=Bearer {signed(exp=NOW_S - 60)}\x01\x01".encode())
    assert challenge == b'{"status":"invalid_token"}'
    server = OAuthBearerServer(validator(), lambda: NOW_MS)
    assert server.evaluate(f"n,a=alice,\x01auth=Bearer {signed()}\x01\x01".encode()) == b""
    assert (server.authorization_id, server.credential_expiry_ms) == ("alice", (NOW_S + 3600) * 1000)


# --- any input: an accepted token or a refusal ----------------------------------------------------

_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) |
                            st.text(max_size=8), lambda inner: st.lists(inner, max_size=3) |
                            st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcXYZ019-_.=+/ \t{}\"", max_size=80) | st.text(max_size=60))
def test_any_token_text_is_accepted_or_refused(token: str) -> None:
    try:
        validator().validate(token, NOW_MS)
    except TokenRefused as refused:
        assert refused.reason and "\n" not in refused.reason


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["sub", "exp", "iat", "nbf", "aud", "iss", "scope", "x"]),
                       _json_values),
       st.dictionaries(st.sampled_from(["kid", "crit", "typ", "x"]), _json_values),
       st.sampled_from(["RS256", "ES256", "HS256", "EdDSA"]))
def test_any_signed_claims_are_accepted_or_refused(claims: dict[str, Any], header: dict[str, Any],
                                                   alg: str) -> None:
    key = {"RS256": RSA_KEY, "ES256": EC_KEYS["ES256"], "HS256": HMAC_SECRET, "EdDSA": ED_KEY}[alg]
    token = make_signed_jws(claims, key, alg, **header)
    try:
        accepted = validator(expected_issuer="i").validate(token, NOW_MS)
    except TokenRefused as refused:
        assert refused.reason
        return
    assert accepted.principal_name == str(claims["sub"]).strip() and accepted.lifetime_ms > NOW_MS - 30_000


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200),
       st.sampled_from([b"", b"eyJhbGciOiJSUzI1NiJ9.", b"eyJhbGciOiJSUzI1NiJ9.e30."]))
def test_any_bytes_in_a_client_message_are_accepted_or_refused(raw: bytes, prefix: bytes) -> None:
    """Through the exchange, as the broker gets them: a challenge, or one of the documented errors."""
    from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse

    for message in (raw, b"n,,\x01auth=Bearer " + prefix + raw + b"\x01\x01"):
        server = OAuthBearerServer(validator(), lambda: NOW_MS)
        try:
            challenge = server.evaluate(message)
        except (MalformedResponse, AuthenticationFailed):
            continue
        assert challenge == b'{"status":"invalid_token"}' or server.complete


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_jwks_bytes_give_keys_or_a_jwks_error(raw: bytes) -> None:
    from kafkapy.server.sasl.jwks import JwksError

    try:
        parse_jwks(raw, "fuzz")
    except JwksError:
        pass



_JWK_TEMPLATES = [public_jwk(RSA_KEY, "rsa"), public_jwk(ED_KEY, "ed"), public_jwk(HMAC_SECRET, "hmac"),
                  *(public_jwk(key, alg) for alg, key in EC_KEYS.items())]
_JWK_MEMBERS = ["kty", "crv", "n", "e", "x", "y", "k", "kid", "use", "alg", "key_ops"]
_JWK_VALUES = (st.binary(max_size=70).map(base64url.encode) | _json_values | st.sampled_from(
    ["RSA", "EC", "OKP", "oct", "P-256", "P-384", "P-521", "Ed25519", "Ed448", "X25519", "sig", "enc",
     "verify", "RS256", "PS512", "ES256", "ES512", "HS256", "EdDSA", "none", "AQAB", "AAAB", "AQ", ""]))
_SIGNERS = {"RS256": (RSA_KEY, "rsa"), "PS384": (RSA_KEY, "rsa"), "ES256": (EC_KEYS["ES256"], "ES256"),
            "ES512": (EC_KEYS["ES512"], "ES512"), "HS256": (HMAC_SECRET, "hmac"), "EdDSA": (ED_KEY, "ed")}


@st.composite
def _mangled_jwk(draw: st.DrawFn) -> Any:
    """A real key with some members removed or replaced by any JSON, or any JSON at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(_json_values)
    jwk = dict(draw(st.sampled_from(_JWK_TEMPLATES)))
    for name in draw(st.lists(st.sampled_from(_JWK_MEMBERS), max_size=4)):
        if draw(st.booleans()):
            jwk.pop(name, None)
        else:
            jwk[name] = draw(_JWK_VALUES)
    return jwk


@settings(max_examples=200, deadline=None)
@given(st.lists(_mangled_jwk(), max_size=4), st.sampled_from(sorted(_SIGNERS)),
       st.sampled_from(["own", "none", "other"]))
def test_any_jwks_keys_read_or_are_skipped_and_tokens_are_accepted_or_refused(
        jwks: list[Any], alg: str, kid: str) -> None:
    """Each key of a set is read or skipped, never an error for the whole set; whatever was read,
    a token is accepted or refused, and each key verifies or says why not."""
    keys = StaticKeys(*jwks)
    key, own_kid = _SIGNERS[alg]
    token = signed(key=key, alg=alg, kid={"own": own_kid, "none": None, "other": "rsa"}[kid])
    try:
        validator(keys=keys).validate(token, NOW_MS)
    except TokenRefused as refused:
        assert refused.reason and "\n" not in refused.reason
    for candidate in keys.keys:
        for any_alg in ALGORITHMS:
            if candidate.may_verify(any_alg):
                assert candidate.verify(any_alg, b"signing input", b"\x01" * 64) is not None

# --- where the keys come from ---------------------------------------------------------------------

def test_a_file_jwks_is_read_once(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [public_jwk(RSA_KEY, "rsa"), {"kty": "XYZ"}]}))
    source = FileJwks(path, path.as_uri())
    source.start()
    assert [k.kid for k in source.keys] == ["rsa"]  # the key it cannot read is skipped
    path.write_text(json.dumps({"keys": []}))
    assert validator(keys=source).validate(signed(), NOW_MS).principal_name == "alice"


class JwksHandler(http.server.BaseHTTPRequestHandler):
    document: dict[str, Any] = {"keys": []}
    gets = 0

    def do_GET(self) -> None:
        type(self).gets += 1
        body = json.dumps(type(self).document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def jwks_server() -> Iterator[tuple[str, type[JwksHandler]]]:
    handler = type("Handler", (JwksHandler,), {"document": {"keys": [public_jwk(RSA_KEY, "rsa")]}, "gets": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jwks", handler
    server.shutdown()
    server.server_close()


def test_an_http_jwks_refreshes_early_for_an_unknown_kid_once_a_minute(
        jwks_server: tuple[str, type[JwksHandler]]) -> None:
    url, handler = jwks_server
    source = HttpJwks(url, refresh_ms=3_600_000, retry_backoff_ms=100, retry_backoff_max_ms=10_000)
    source.start()
    try:
        assert handler.gets == 1
        handler.document = {"keys": [public_jwk(OTHER_RSA_KEY, "rotated")]}
        token = signed(key=OTHER_RSA_KEY, kid="rotated")
        with pytest.raises(TokenRefused):
            validator(keys=source).validate(token, NOW_MS)  # refused now; the refresh runs meanwhile
        deadline = time.monotonic() + 10
        while source.refreshes < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert validator(keys=source).validate(token, NOW_MS).principal_name == "alice"
        # Another unknown kid asks again; the same one within a minute does not.
        for _ in range(3):
            with pytest.raises(TokenRefused):
                validator(keys=source).validate(signed(kid="gone"), NOW_MS)
        deadline = time.monotonic() + 10
        while source.refreshes < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        assert (source.refreshes, handler.gets) == (2, 3)
    finally:
        source.close()



class MissingKeyIds(RuleBasedStateMachine):
    """An http JWKS asked again and again for keys it does not hold, against Kafka's rule
    (RefreshingHttpsJwks.maybeExpediteRefresh): a kid asks for an early refresh unless it asked
    less than a minute ago; the kids are remembered in an access-ordered cache of 16, so one that
    keeps being asked stays; a kid over 1000 characters asks nothing and is not remembered."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.jwks = HttpJwks("http://127.0.0.1:9/jwks", 3_600_000, 100, 1000, clock=lambda: self.now)
        self.model: OrderedDict[str, float] = OrderedDict()  # Kafka's LinkedHashMap(accessOrder=true)

    @rule(kid=st.sampled_from([f"k{i}" for i in range(20)]) | st.none() | st.just("x" * 1001))
    def a_token_names_a_key_not_held(self, kid: str | None) -> None:
        self.jwks._wake.clear()
        self.jwks.missing(kid)
        key = kid or ""
        expected = False
        if len(key) <= 1000:
            next_check = self.model.get(key)
            if next_check is not None:
                self.model.move_to_end(key)
            if next_check is None or next_check <= self.now:
                self.model[key] = self.now + 60_000
                while len(self.model) > 16:
                    self.model.popitem(last=False)
                expected = True
        assert self.jwks._wake.is_set() == expected

    @rule(ms=st.integers(0, 70_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms


TestMissingKeyIds = MissingKeyIds.TestCase
TestMissingKeyIds.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)

def test_a_failing_refresh_keeps_the_keys(jwks_server: tuple[str, type[JwksHandler]]) -> None:
    url, _ = jwks_server
    source = HttpJwks(url, refresh_ms=3_600_000, retry_backoff_ms=10, retry_backoff_max_ms=200)
    source.start()
    source.location = "http://127.0.0.1:1/jwks"  # nothing listens there
    source.refresh()
    assert [k.kid for k in source.keys] == ["rsa"] and source.refreshes == 0
    source.close()


# --- which validator a listener gets --------------------------------------------------------------

JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
BASE = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS}
HANDLER_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"


def listener_validator(settings: dict[str, Any]) -> Any:
    return sasl_settings(BrokerConfig.build({**BASE, **settings}), "SASL_PLAINTEXT").oauthbearer


def test_the_callback_handler_class_selects_the_signed_validator(tmp_path: Path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [public_jwk(RSA_KEY, "rsa")]}))
    chosen = listener_validator({HANDLER_KEY: SIGNED_VALIDATOR,
                                 "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
                                 "sasl.oauthbearer.expected.audience": "kafka, other",
                                 "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer":
                                     "https://idp",
                                 "sasl.oauthbearer.expected.issuer": "ignored: the listener's key wins",
                                 "sasl.oauthbearer.clock.skew.seconds": "5"})
    assert isinstance(chosen, SignedValidator) and isinstance(chosen.keys, FileJwks)
    assert (chosen.expected_audience, chosen.expected_issuer, chosen.clock_skew_s) == \
        (("kafka", "other"), "https://idp", 5)
    # The JWKS URL alone does not select it (as in Kafka): the unsecured validator, and a warning.
    assert isinstance(listener_validator({"sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri()}),
                      UnsecuredValidator)


@pytest.mark.parametrize(("settings", "key"), [
    ({HANDLER_KEY: SIGNED_VALIDATOR}, "sasl.oauthbearer.jwks.endpoint.url"),
    ({HANDLER_KEY: SIGNED_VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/keys"},
     "sasl.oauthbearer.jwks.endpoint.url"),
    ({HANDLER_KEY: SIGNED_VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "file:///no/such/jwks.json"},
     "sasl.oauthbearer.jwks.endpoint.url"),
    ({HANDLER_KEY: SIGNED_VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "https://idp/keys",
      "listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.refresh.ms": "0"},
     "listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.refresh.ms"),
    ({HANDLER_KEY: "com.example.Validator"}, HANDLER_KEY),
])
def test_signed_validator_configuration_errors_name_the_key(settings: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as raised:
        listener_validator(settings)
    assert "\n" not in str(raised.value)


def test_without_cryptography_only_the_signed_validator_is_missing(tmp_path: Path) -> None:
    """cryptography is the kafkapy[oauth] extra: without it, unsecured listeners start as before and a
    signed-token listener's start fails naming the extra."""
    import subprocess
    import sys

    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": []}))
    script = f"""
import sys
sys.modules["cryptography"] = None  # an import of it fails, as where it is not installed
from kafkapy.embedded import Broker
from kafkapy.server.config import ConfigError
base = {BASE!r}
with Broker(base):
    print("unsecured: started")
try:
    with Broker({{**base, {HANDLER_KEY!r}: {SIGNED_VALIDATOR!r},
                 "sasl.oauthbearer.jwks.endpoint.url": {jwks.as_uri()!r}}}):
        pass
except ConfigError as exc:
    print(exc)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    started, refused = result.stdout.strip().splitlines()
    assert started == "unsecured: started"
    assert HANDLER_KEY in refused and "pip install 'kafkapy[oauth]'" in refused


def test_the_broker_fetches_the_jwks_at_start_and_stops_refreshing_at_stop(
        jwks_server: tuple[str, type[JwksHandler]]) -> None:
    from kafkapy.embedded import Broker

    url, handler = jwks_server

    def refreshers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == f"jwks-refresh {url}" and t.is_alive()]

    with Broker({**BASE, HANDLER_KEY: SIGNED_VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": url}):
        assert handler.gets == 1 and len(refreshers()) == 1
    assert refreshers() == []
