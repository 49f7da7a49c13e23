"""SASL/OAUTHBEARER (RFC 7628, KIP-255) as Kafka's OAuthBearerSaslServer serves it.

The client's one message is RFC 7628's initial response: a GS2 header ``n,[a=authzid],`` then
``%x01``-separated key=value pairs, one of them ``auth=Bearer <token>`` and the rest SASL extensions,
then ``%x01%x01`` (OAuthBearerClientInitialResponse's pattern, its key and value alphabets). A
message that does not follow it is a MalformedResponse (the client gets Kafka's generic message).

The token goes to the listener's validator (Kafka's default: the unsecured JWS validator,
kafkapy.server.sasl.unsecured_jws; with Kafka's OAuthBearerValidatorCallbackHandler, signed tokens:
kafkapy.server.sasl.signed_jws). A valid token completes the exchange with an empty challenge, the
principal being the token's principal name. A refused token is not a failure yet: as RFC 7628 says, the server
answers with an error challenge, ``{"status":"invalid_token"}`` (Kafka's JSON, with ``"scope"``
for insufficient_scope), the client acknowledges with a lone ``%x01``, and only then does the
authentication fail, with that JSON as the message the client is told. An authorization id that is
not the token's principal is refused at once, with Kafka's message. Every extension is accepted
(the unsecured validator's rule).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Protocol

from kafkapy.protocol.strings import decode_string
from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse
from kafkapy.server.sasl.unsecured_jws import TokenRefused

__all__ = ["OAUTHBEARER", "ClientInitialResponse", "OAuthBearerServer", "TokenValidator", "ValidatedToken",
           "error_challenge", "parse_client_initial_response"]

log = logging.getLogger(__name__)

OAUTHBEARER = "OAUTHBEARER"
SEPARATOR = "\x01"
CONTROL_A = b"\x01"  # the client's acknowledgement of an error challenge
AUTH_KEY = "auth"
# OAuthBearerClientInitialResponse's grammar: saslname (RFC 5801, "=" and "," escaped), key, value.
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEPARATOR}(?P<kvpairs>(?:{_KEY}={_VALUE}{SEPARATOR})*){SEPARATOR}")
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_EXTENSION_KEY = re.compile(_KEY)
_EXTENSION_VALUE = re.compile(_VALUE)


class ValidatedToken(Protocol):
    """What the exchange needs of a valid token (Kafka's OAuthBearerToken)."""

    @property
    def principal_name(self) -> str: ...

    @property
    def lifetime_ms(self) -> int: ...


class TokenValidator(Protocol):
    """A listener's OAUTHBEARER validator (Kafka's server callback handler): the unsecured one
    (unsecured_jws) or the signed one (signed_jws). ``start`` runs once when the broker starts (off
    the event loop), ``close`` when it stops."""

    def validate(self, token: str, now_ms: int) -> ValidatedToken: ...

    @property
    def refusal_log_level(self) -> int:
        """The level a refused token is logged at (Kafka's handlers differ: DEBUG and WARN)."""
        ...

    def start(self) -> None: ...

    def close(self) -> None: ...


class ClientInitialResponse:
    """The client's message: its token, its authorization id ("" if none) and its extensions."""

    __slots__ = ("authorization_id", "extensions", "token")

    def __init__(self, token: str, authorization_id: str, extensions: dict[str, str]) -> None:
        self.token = token
        self.authorization_id = authorization_id
        self.extensions = extensions


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """The parsed message; MalformedResponse with Kafka's reason if it is not one. Bytes that are
    not UTF-8 are replaced, as Java's ``new String(bytes, UTF_8)`` does, and then fail the grammar."""
    match = _CLIENT_INITIAL_RESPONSE.fullmatch(decode_string(message))
    if match is None:
        raise MalformedResponse("Invalid OAUTHBEARER client first message")
    properties: dict[str, str] = {}
    for pair in match["kvpairs"].split(SEPARATOR)[:-1]:  # each pair ends with the separator
        key, _, value = pair.partition("=")
        properties[key] = value  # Utils.parseMap: the last of a repeated key wins
    auth = properties.pop(AUTH_KEY, None)
    if auth is None:
        raise MalformedResponse("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in properties.items():  # validateExtensions: the grammar has checked these already
        if not _EXTENSION_KEY.fullmatch(key):
            raise MalformedResponse(f"Extension name {key} is invalid")
        if not _EXTENSION_VALUE.fullmatch(value):
            raise MalformedResponse(f"Extension value ({value}) for extension {key} is invalid")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise MalformedResponse("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise MalformedResponse(f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}")
    return ClientInitialResponse(auth_match["token"], match["authzid"] or "", properties)


def error_challenge(refused: TokenRefused) -> str:
    """OAuthBearerSaslServer's JSON error challenge (its spacing, kept: a client may compare it)."""
    challenge = f'{{"status":"{refused.status}"'
    if refused.scope is not None:
        challenge += f', "scope":"{refused.scope}"'
    return challenge + "}"


class OAuthBearerServer:
    """One connection's OAUTHBEARER exchange; ``now_ms()`` is the broker's wall clock in ms."""

    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator, now_ms: Callable[[], int]) -> None:
        self._validator = validator
        self._now_ms = now_ms
        self._token: ValidatedToken | None = None
        self._error: str | None = None  # the error challenge sent, until the client acknowledges it
        self.extensions: dict[str, str] = {}

    def evaluate(self, token: bytes) -> bytes:
        if self._token is not None:
            raise MalformedResponse("OAUTHBEARER authentication already completed")
        if token == CONTROL_A and self._error is not None:
            raise AuthenticationFailed(self._error)
        self._error = None
        response = parse_client_initial_response(token)
        try:
            jws = self._validator.validate(response.token, self._now_ms())
        except TokenRefused as refused:
            log.log(self._validator.refusal_log_level, "OAUTHBEARER token refused: %s", refused.reason)
            self._error = error_challenge(refused)
            return self._error.encode()
        if response.authorization_id and response.authorization_id != jws.principal_name:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id "
                f"({response.authorization_id}) that is different from the token's principal name "
                f"({jws.principal_name})")
        self._token, self.extensions = jws, response.extensions
        return b""

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise RuntimeError("OAUTHBEARER authentication has not completed")
        return self._token.principal_name

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the token expires (its ``exp``): Kafka's CREDENTIAL.LIFETIME.MS negotiated property,
        which bounds the session (KIP-368)."""
        return None if self._token is None else self._token.lifetime_ms
