"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer serves it.

The client's one token is ``authzid NUL username NUL password`` in UTF-8. Kafka's checks, in its
order and with its messages: exactly three fields, a username, a password, the password the JAAS
config gives the user (``user_<name>="<password>"``), and an authorization id that is empty or the
username. The exchange completes in one step with an empty challenge.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kafkapy.protocol.strings import decode_string
from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse

__all__ = ["PLAIN", "PlainServer", "parse_plain_token"]

PLAIN = "PLAIN"
INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"


def parse_plain_token(token: bytes) -> tuple[str, str, str]:
    """(authorization id, username, password) from a PLAIN token; MalformedResponse or
    AuthenticationFailed as Kafka raises them. Bytes that are not UTF-8 are read as Java's
    ``new String(bytes, UTF_8)`` reads them: replaced, so they match no configured user."""
    fields = decode_string(token).split("\0")
    if len(fields) != 3:
        raise MalformedResponse(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}")
    authorization_id, username, password = fields
    if not username:
        raise AuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise AuthenticationFailed("Authentication failed: password not specified")
    return authorization_id, username, password


class PlainServer:
    """One connection's PLAIN exchange against the JAAS config's users."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._authorization_id is not None:
            raise MalformedResponse("PLAIN authentication already completed")
        authorization_id, username, password = parse_plain_token(token)
        expected = self._users.get(username)
        # compare_digest: how long the comparison takes says nothing about the password.
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        if authorization_id and authorization_id != username:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._authorization_id = username
        return b""

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def credential_expiry_ms(self) -> int | None:
        return None  # a password does not expire (PLAIN has no delegation tokens)

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("PLAIN authentication has not completed")
        return self._authorization_id
