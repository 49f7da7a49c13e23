"""Unsecured JWTs (RFC 7515 with ``"alg":"none"``) validated as Kafka's default OAUTHBEARER server
callback handler does (OAuthBearerUnsecuredJws, OAuthBearerUnsecuredValidatorCallbackHandler,
OAuthBearerValidationUtils).

This is what a Kafka broker does with OAUTHBEARER out of the box, and what integration tests use:
librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt`` and Kafka's OAuthBearerUnsecuredLoginCallbackHandler
make such tokens. A token is ``base64(header).base64(claims).`` (no signature); the header's ``alg``
must be ``none``; ``exp`` is required, ``iat`` optional, both in (possibly fractional) seconds; the
principal is a string claim (``sub`` unless ``unsecuredValidatorPrincipalClaimName`` says otherwise);
the scope claim (``scope``) is a string or a list of strings.

The checks run in Kafka's order, and each failure is a TokenRefused whose ``reason`` goes to the
broker's log; the client only learns the status ("invalid_token", or "insufficient_scope" with the
required scope), as RFC 7628's error challenge carries it. Time is the caller's ``now_ms``, so a
broker on a VirtualClock moves token expiry with its clock.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
from collections.abc import Mapping
from typing import ClassVar

import attrs

from kafkapy.server.config import ConfigError
from kafkapy.server.sasl import base64url

__all__ = ["TokenRefused", "UnsecuredJws", "UnsecuredValidator", "make_unsecured_jws", "parse_unsecured_jws"]

# The JAAS options Kafka's OAuthBearerUnsecuredValidatorCallbackHandler reads.
PRINCIPAL_CLAIM_NAME_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_NAME_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
ALLOWABLE_CLOCK_SKEW_MS_OPTION = "unsecuredValidatorAllowableClockSkewMs"
# OAuthBearerScopeUtils: a scope item is RFC 6749's scope-token (NQCHAR without space).
_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")
_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)

Claim = str | int | float | list[str]


class TokenRefused(Exception):
    """The token is not valid: ``reason`` for the log, ``scope`` the required scope when that is why."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.scope = scope

    @property
    def status(self) -> str:
        """RFC 7628's error status, as Kafka's handler chooses it."""
        return "insufficient_scope" if self.scope is not None else "invalid_token"


def _text(value: object) -> str:
    """Jackson's JsonNode.asText() of a scalar (how Kafka reads a non-number claim)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float, str)):
        return str(value)
    return ""  # an object: asText() of a container is empty


def _claim(value: object) -> Claim:
    """A claim as Kafka's OAuthBearerUnsecuredJws.convert keeps it: arrays as lists of text,
    numbers as numbers, everything else as text."""
    if isinstance(value, list):
        return [_text(item) for item in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _text(value)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")  # Python's json reads NaN and Infinity; Jackson does not


def _decode_part(part: str) -> dict[str, Claim]:
    """One Base64URL-encoded JSON object (padding optional; Kafka's decoder also takes '+' and '/')."""
    try:
        raw = base64.b64decode(part.translate(str.maketrans("-_", "+/")) + "=" * (-len(part) % 4),
                               validate=True)
    except (binascii.Error, ValueError):
        raise TokenRefused("malformed Base64 URL encoded value") from None
    try:
        node = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise TokenRefused("malformed JSON") from None
    if not isinstance(node, dict):  # Jackson's fields() of a non-object is empty
        return {}
    return {str(name): _claim(value) for name, value in node.items()}


def _seconds_to_ms(seconds: int | float) -> int:
    """Java's Math.round(seconds * 1000) into a long."""
    millis = float(seconds) * 1000
    if math.isnan(millis):
        return 0
    if math.isinf(millis):
        return _LONG_MAX if millis > 0 else _LONG_MIN
    return max(_LONG_MIN, min(_LONG_MAX, math.floor(millis + 0.5)))


def _type_name(value: Claim) -> str:
    """Java's simple class name of a converted claim, for Kafka's messages."""
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    return "Integer" if isinstance(value, int) else "Double"


def _number(claims: Mapping[str, Claim], name: str) -> int | float | None:
    value = claims.get(name)
    if value is None or isinstance(value, (int, float)):
        return value
    raise TokenRefused(f"The '{name}' claim was not of type Number: {_type_name(value)}")


@attrs.frozen
class UnsecuredJws:
    """A parsed unsecured JWS: its claims, principal, scope and times (ms since the epoch)."""

    claims: Mapping[str, Claim]
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int  # exp
    start_time_ms: int | None  # iat
    expiration_time: int | float
    issued_at: int | float | None


def parse_unsecured_jws(token: str, principal_claim_name: str = "sub",
                        scope_claim_name: str = "scope") -> UnsecuredJws:
    """The token's claims, with OAuthBearerUnsecuredJws's structural checks in its order;
    TokenRefused with Kafka's reason if one fails."""
    if ".." in token:
        raise TokenRefused("Malformed compact serialization contains '..'")
    splits = token.split(".")
    if len(splits) != 3:
        raise TokenRefused("Unsecured JWS compact serializations must have 3 dot-separated "
                           "Base64URL-encoded values")
    header = _decode_part(splits[0])
    claims = _decode_part(splits[1])
    alg = header.get("alg")
    if alg is None:
        raise TokenRefused("JWS header must have an Algorithm value")
    if alg != "none":
        raise TokenRefused("Unsecured JWS must have 'none' for an algorithm")
    if splits[2]:
        raise TokenRefused("Unsecured JWS must not contain a digital signature")
    scope_claim = claims.get(scope_claim_name)
    if isinstance(scope_claim, str):
        scope = frozenset([scope_claim.strip()] if scope_claim.strip() else [])
    elif scope_claim is None or isinstance(scope_claim, list):
        scope = frozenset(item.strip() for item in scope_claim or () if item.strip())
    else:
        raise TokenRefused(f"The '{scope_claim_name}' claim was not of type List: {_type_name(scope_claim)}")
    expiration = _number(claims, "exp")
    if expiration is None:
        raise TokenRefused("No expiration time in JWT")
    principal = claims.get(principal_claim_name)
    if principal is not None and not isinstance(principal, str):
        raise TokenRefused(f"The '{principal_claim_name}' claim was not of type String: "
                           f"{_type_name(principal)}")
    if principal is None or not principal.strip():
        raise TokenRefused(f"No principal name in JWT claim: {principal_claim_name}")
    issued_at = _number(claims, "iat")
    return UnsecuredJws(claims, principal, scope, _seconds_to_ms(expiration),
                        None if issued_at is None else _seconds_to_ms(issued_at), expiration, issued_at)


def make_unsecured_jws(claims: Mapping[str, object]) -> str:
    """An unsecured JWS of ``claims``, as Kafka's OAuthBearerUnsecuredLoginCallbackHandler and
    librdkafka make them: for clients that take a token (kafka-python's and aiokafka's token
    providers) in tests and examples."""
    def part(value: Mapping[str, object]) -> str:
        return base64url.encode(json.dumps(value).encode())

    return f"{part({'alg': 'none'})}.{part(claims)}."


def _option(options: Mapping[str, str], name: str) -> str:
    return options.get(name, "").strip()


@attrs.frozen
class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, configured from the JAAS options of the
    listener's OAUTHBEARER login module (``from_jaas_options``)."""

    refusal_log_level: ClassVar[int] = logging.DEBUG  # Kafka's handler logs refusals at DEBUG
    principal_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str], key: str) -> UnsecuredValidator:
        """The validator the options describe; ConfigError naming ``key`` (the JAAS config's key)
        for a scope item or a clock skew Kafka would refuse (Kafka refuses them at the first
        login; kafkapy at start)."""
        scope_items = _option(options, REQUIRED_SCOPE_OPTION).split(" ")
        for item in scope_items:
            if item and not _SCOPE_ITEM.fullmatch(item):
                raise ConfigError(f"invalid value for {key}: {REQUIRED_SCOPE_OPTION} has an invalid "
                                  f"scope value: {item}")
        skew_text = _option(options, ALLOWABLE_CLOCK_SKEW_MS_OPTION)
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            skew = -1
        if not 0 <= skew < 2**31:  # a Java int, not negative
            raise ConfigError(f"invalid value for {key}: {ALLOWABLE_CLOCK_SKEW_MS_OPTION} must be a "
                              f"non-negative int, not {skew_text!r}")
        return cls(_option(options, PRINCIPAL_CLAIM_NAME_OPTION) or "sub",
                   _option(options, SCOPE_CLAIM_NAME_OPTION) or "scope",
                   tuple(item for item in scope_items if item), skew)

    def start(self) -> None:
        """Nothing to load: the validator needs no keys."""

    def close(self) -> None:
        """Nothing to stop."""

    def validate(self, token: str, now_ms: int) -> UnsecuredJws:
        """The token if it is valid at ``now_ms``; TokenRefused otherwise, checked in Kafka's order."""
        jws = parse_unsecured_jws(token, self.principal_claim_name, self.scope_claim_name)
        skew = self.allowable_clock_skew_ms
        if jws.issued_at is not None and 1000 * float(jws.issued_at) > now_ms + skew:
            raise TokenRefused(f"The Issued At value ({float(jws.issued_at):f} seconds) was after the "
                               f"indicated time ({now_ms} ms) plus allowable clock skew ({skew} ms)")
        if now_ms - skew >= 1000 * float(jws.expiration_time):
            raise TokenRefused(f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) "
                               f"was on or after the Expiration Time value "
                               f"({float(jws.expiration_time):f} seconds)")
        if jws.issued_at is not None and float(jws.expiration_time) <= float(jws.issued_at):
            raise TokenRefused(f"The Expiration Time time ({float(jws.expiration_time):f} seconds) was not "
                               f"after the Issued At time ({float(jws.issued_at):f} seconds)")
        for required in self.required_scope:
            if required not in jws.scope:
                wanted = f"[{', '.join(self.required_scope)}]"  # Java's List.toString
                raise TokenRefused(f"The provided scope ({sorted(jws.scope)}) was missing a required scope "
                                   f"({required}).  All required scope elements: {wanted}", scope=wanted)
        return jws
