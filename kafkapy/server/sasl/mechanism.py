"""What a SASL mechanism's server side is to the authenticator: tokens in, challenges out.

Kafka's two kinds of failure are kept apart, because clients see them differently: an
AuthenticationFailed (Kafka's SaslAuthenticationException) carries the message the client is told
("Authentication failed: Invalid username or password"); a MalformedResponse (Kafka's SaslException)
is only logged, and the client gets Kafka's generic "invalid credentials" message.
"""

from __future__ import annotations

from typing import Protocol

from kafkapy.errors import ErrorCode, KafkaApiError

__all__ = ["AuthenticationFailed", "MalformedResponse", "SaslServer"]


class AuthenticationFailed(KafkaApiError):
    """The client's credentials were refused; ``message`` is what the client is told."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


class MalformedResponse(KafkaApiError):
    """The client's token does not follow the mechanism; ``reason`` is for the broker's log only."""

    def __init__(self, reason: str) -> None:
        super().__init__(ErrorCode.SASL_AUTHENTICATION_FAILED, reason)
        self.reason = reason


class SaslServer(Protocol):
    """The server side of one SASL exchange on one connection (javax.security.sasl.SaslServer)."""

    mechanism: str

    def evaluate(self, token: bytes) -> bytes:
        """The challenge answering the client's ``token``; AuthenticationFailed or MalformedResponse."""
        ...

    @property
    def complete(self) -> bool:
        """Whether the exchange has succeeded (no more tokens are expected)."""
        ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user name, once complete: the principal is ``User:<it>``."""
        ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential used expires (ms since the epoch), once complete; None if it does not
        (Kafka's CREDENTIAL.LIFETIME.MS negotiated property: it bounds the session, KIP-368)."""
        ...
