"""Signed JWTs (RFC 7519 in a JWS, RFC 7515) validated as Kafka's OAuthBearerValidatorCallbackHandler
does (KIP-768: ValidatorAccessTokenValidator over jose4j's JwtConsumer, then ClaimValidationUtils).

The checks, in order, each failure a TokenRefused whose ``reason`` goes to the broker's log (the
client is only told ``invalid_token``, as Kafka's handler says):

* the compact form (SerializedJwt): after trimming, three non-empty dot-separated sections;
* the header: Base64URL JSON with an ``alg`` jose4j verifies (RS/PS/ES/HS 256/384/512, EdDSA);
  ``none`` is refused (Kafka's DISALLOW_NONE), and so is a ``crit`` header this does not know;
* the key: from the JWKS, those that suit the algorithm (and the ``kid``, if the header has one).
  None: the token is refused and the key source asked for an early refresh;
* the signature, with such a key (RSA keys under 2048 bits and HMAC keys shorter than the hash are
  refused, as jose4j refuses them);
* the claims: a JSON object whose member names are unique; ``exp`` and ``iat`` required numbers,
  ``nbf`` a number if present; at the broker's clock (seconds, jose4j's evaluation time), the token
  must not have expired (``now - skew >= exp``) nor start later (``now + skew < nbf``); ``iss``
  must be ``sasl.oauthbearer.expected.issuer`` if that is set; ``aud`` must hold one of
  ``sasl.oauthbearer.expected.audience`` if that is set, and, as jose4j's default, a token with an
  ``aud`` is refused when it is not set. All the claim problems found are reported together;
* Kafka's own: the scope claim (a string is one scope, a list is many; no blank item, no
  duplicate), the subject claim (a non-blank string: the principal, trimmed), exp and iat not
  negative.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from kafkapy.server.config import ConfigError
from kafkapy.server.sasl import base64url
from kafkapy.server.sasl.jwks import ALGORITHMS, JwksError, KeySource, PrivateKey, sign
from kafkapy.server.sasl.unsecured_jws import TokenRefused

__all__ = ["SignedJwt", "SignedValidator", "java_split_dots", "make_signed_jws"]

_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))  # String.trim() strips every char <= ' '


def java_split_dots(token: str) -> list[str]:
    """Java's ``token.split("\\\\.")``: trailing empty sections dropped."""
    parts = token.split(".")
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for name, value in pairs:
        if name in seen:
            raise ValueError(f"the member name {name!r} appears twice")
        seen[name] = value
    return seen


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _json_object(part: str, what: str) -> dict[str, Any]:
    try:
        node = json.loads(base64url.decode(part), object_pairs_hook=_unique_members,
                          parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise TokenRefused(f"Could not validate the access token: the {what} is not Base64URL-encoded "
                           f"JSON ({exc})") from None
    if not isinstance(node, dict):
        raise TokenRefused(f"Could not validate the access token: the {what} is not a JSON object")
    return node


def _numeric_date(claims: Mapping[str, Any], name: str) -> int | None:
    """A NumericDate claim in whole seconds (Java's Number.longValue()); None if absent."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenRefused(f"Could not validate the access token: the '{name}' claim is not a number")
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return _LONG_MAX if value > 0 else _LONG_MIN
    return max(_LONG_MIN, min(_LONG_MAX, int(value)))


def _millis(seconds: int) -> int:
    """NumericDate.getValueInMillis(): seconds * 1000 in a Java long, which wraps (a far-future exp
    comes out negative, and Kafka then refuses it as negative)."""
    return (seconds * 1000 + 2**63) % 2**64 - 2**63


def _strings(value: Any, name: str) -> list[str]:
    """A claim that is a string or a list of strings (``aud``), as a list."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise TokenRefused(f"Could not validate the access token: the '{name}' claim is neither a string "
                       "nor a list of strings")


def _claim_text(name: str, value: Any) -> str:
    """ClaimValidationUtils.validateString: non-null, non-empty, not only whitespace; trimmed."""
    if value is None:
        raise TokenRefused(f"{name} value must be non-null")
    if not isinstance(value, str):
        raise TokenRefused(f"Could not extract the '{name}' claim from the access token: not a string")
    if not value:
        raise TokenRefused(f"{name} value must be non-empty")
    trimmed: str = value.strip(_JAVA_WHITESPACE)
    if not trimmed:
        raise TokenRefused(f"{name} value must not contain only whitespace")
    return trimmed


@attrs.frozen
class SignedJwt:
    """A validated token: its header and claims, principal, scope and times (ms since the epoch)."""

    header: Mapping[str, Any]
    claims: Mapping[str, Any]
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int  # exp
    start_time_ms: int  # iat


@attrs.define
class SignedValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler: tokens signed by a key of ``keys``, checked
    against its settings (Kafka's defaults)."""

    refusal_log_level: ClassVar[int] = logging.WARNING  # Kafka's handler logs refusals at WARN
    keys: KeySource
    clock_skew_s: int = 30  # sasl.oauthbearer.clock.skew.seconds
    expected_audience: tuple[str, ...] = ()  # sasl.oauthbearer.expected.audience
    expected_issuer: str | None = None  # sasl.oauthbearer.expected.issuer
    scope_claim_name: str = "scope"  # sasl.oauthbearer.scope.claim.name
    sub_claim_name: str = "sub"  # sasl.oauthbearer.sub.claim.name

    def start(self) -> None:
        """Load the keys (at broker start, off the event loop); ConfigError naming the JWKS key if
        they cannot be had (Kafka fails the broker's start then too)."""
        try:
            self.keys.start()
        except JwksError as exc:
            raise ConfigError(f"invalid value {self.keys.location!r} for sasl.oauthbearer.jwks.endpoint.url: "
                              f"the OAuth validator cannot load its keys: {exc}") from None

    def close(self) -> None:
        self.keys.close()

    def validate(self, token: str, now_ms: int) -> SignedJwt:
        """The token if it is valid at ``now_ms`` (the broker's clock); TokenRefused otherwise."""
        token = token.strip(_JAVA_WHITESPACE)
        if not token:
            raise TokenRefused("Empty JWT provided; expected three sections (header, payload, and signature)")
        sections = java_split_dots(token)
        if len(sections) != 3:
            raise TokenRefused(f"Malformed JWT provided; expected three sections (header, payload, and "
                               f"signature), but {len(sections)} sections provided")
        for section, name in zip(sections, ("header", "payload", "signature")):
            if not section.strip(_JAVA_WHITESPACE):
                raise TokenRefused(f"Malformed JWT provided; the {name} section is missing")
        parts = token.split(".")  # jose4j's own split keeps a trailing empty section
        if len(parts) != 3:
            raise TokenRefused(f"Could not validate the access token: a JWS has 3 parts, not {len(parts)}")
        header_part, payload_part, signature_part = parts
        header = _json_object(header_part, "JWS header")
        alg = self._algorithm(header)
        try:
            signature = base64url.decode(signature_part)
        except ValueError:
            raise TokenRefused("Could not validate the access token: the signature is not Base64URL") \
                from None
        # UTF-8: a payload that is not ASCII cannot be Base64URL, and fails below, not here.
        self._verify(header, alg, f"{header_part}.{payload_part}".encode(), signature)
        claims = _json_object(payload_part, "JWT claims set")
        expiration_s, issued_at_s = self._check_claims(claims, now_ms)
        scope = self._scope(claims)
        expiration, issued_at = _millis(expiration_s), _millis(issued_at_s)
        if expiration < 0:
            raise TokenRefused(f'exp value must be non-negative; value given was "{expiration}"')
        sub = _claim_text(self.sub_claim_name, claims.get(self.sub_claim_name))
        if issued_at < 0:
            raise TokenRefused(f'iat value must be null or non-negative; value given was "{issued_at}"')
        return SignedJwt(header, claims, sub, scope, expiration, issued_at)

    @staticmethod
    def _algorithm(header: Mapping[str, Any]) -> str:
        alg = header.get("alg")
        if alg is None:
            raise TokenRefused("Could not validate the access token: the JWS header has no 'alg'")
        if alg == "none":
            raise TokenRefused("Could not validate the access token: 'none' is not a permitted algorithm "
                               "(unsecured tokens are refused)")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise TokenRefused(f"Could not validate the access token: the algorithm {alg!r} is not one "
                               f"of {', '.join(ALGORITHMS)}")
        if "crit" in header:
            raise TokenRefused(f"Could not validate the access token: unrecognized critical header "
                               f"parameters {header['crit']!r}")
        return alg

    def _verify(self, header: Mapping[str, Any], alg: str, signing_input: bytes, signature: bytes) -> None:
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("Could not validate the access token: the JWS header's 'kid' is not a string")
        candidates = [key for key in self.keys.keys
                      if key.may_verify(alg) and (kid is None or key.kid == kid)]
        if not candidates:
            self.keys.missing(kid)
            raise TokenRefused(f"Could not validate the access token: no key in the JWKS from "
                               f"{self.keys.location} may verify a token with header {json.dumps(header)}")
        problems = [key.verify(alg, signing_input, signature) for key in candidates]
        if None not in problems:
            raise TokenRefused(f"Could not validate the access token: JWS signature check failed: "
                               f"{problems[0]} (header {json.dumps(header)})")

    def _check_claims(self, claims: Mapping[str, Any], now_ms: int) -> tuple[int, int]:
        """jose4j's claim checks (all the problems at once); (exp, iat) in seconds."""
        problems: list[str] = []
        expiration = _numeric_date(claims, "exp")
        issued_at = _numeric_date(claims, "iat")
        not_before = _numeric_date(claims, "nbf")
        now, skew = now_ms // 1000, self.clock_skew_s
        if expiration is None:
            problems.append("no Expiration Time (exp) claim")
        elif now - skew >= expiration:
            problems.append(f"the JWT has expired: the time ({now} s) is on or after its exp "
                            f"({expiration} s) even with {skew} s of clock skew")
        if issued_at is None:
            problems.append("no Issued At (iat) claim")
        if not_before is not None and now + skew < not_before:
            problems.append(f"the JWT is not valid yet: the time ({now} s) is before its nbf "
                            f"({not_before} s) even with {skew} s of clock skew")
        if "aud" in claims:
            audiences = _strings(claims["aud"], "aud")
            if not set(audiences) & set(self.expected_audience):
                problems.append(f"the Audience (aud) claim {audiences} holds none of the expected audiences "
                                f"{list(self.expected_audience)} (sasl.oauthbearer.expected.audience)")
        elif self.expected_audience:
            problems.append("no Audience (aud) claim")
        if self.expected_issuer is not None:
            issuer = claims.get("iss")
            if issuer is None:
                problems.append(f"no Issuer (iss) claim, expected {self.expected_issuer}")
            elif issuer != self.expected_issuer:
                problems.append(f"the Issuer (iss) claim {issuer!r} is not the expected "
                                f"{self.expected_issuer!r}")
        if problems:
            raise TokenRefused("Could not validate the access token: " + "; ".join(problems))
        assert expiration is not None and issued_at is not None
        return expiration, issued_at

    def _scope(self, claims: Mapping[str, Any]) -> frozenset[str]:
        raw = claims.get(self.scope_claim_name)
        items: Sequence[Any] = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        scope: set[str] = set()
        for item in items:
            item = _claim_text(self.scope_claim_name, item)
            if item in scope:
                raise TokenRefused(f"{self.scope_claim_name} value must not contain duplicates - {item} "
                                   "already present")
            scope.add(item)
        return frozenset(scope)


def make_signed_jws(claims: Mapping[str, object], key: PrivateKey | bytes, alg: str = "RS256",
                    kid: str | None = None, **header: object) -> str:
    """A JWT of ``claims`` signed with ``key`` (an identity provider's private key, or an HMAC
    secret), as a provider issues them: for clients that take a token (kafka-python's and
    aiokafka's token providers, librdkafka's oauth_cb, a test's token endpoint) in tests and
    examples. ``kid`` names the key in the provider's JWKS (``public_jwk``)."""
    head = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid is not None else {}), **header}

    def part(value: Mapping[str, object]) -> str:
        return base64url.encode(json.dumps(value).encode())

    signing_input = f"{part(head)}.{part(claims)}"
    signature = sign(key, alg, signing_input.encode("ascii"))
    return f"{signing_input}.{base64url.encode(signature)}"
