"""The project's exception types.

Two kinds, as h11 splits them: the peer sent something illegal (DecodeError, a
RemoteProtocolError in h11's terms), or the caller asked for something illegal
(EncodeError, a LocalProtocolError). Both carry the Kafka error code a broker
would answer with, where one applies.
"""

from __future__ import annotations

__all__ = ["DecodeError", "EncodeError", "KafkaPyError"]

# Kafka's CORRUPT_MESSAGE (2) is what a Java broker answers for bytes it cannot
# parse; INVALID_REQUEST (42) for a well-formed request it will not honour.
CORRUPT_MESSAGE = 2
INVALID_REQUEST = 42


class KafkaPyError(Exception):
    """Base of every exception kafkapy raises on purpose."""

    error_code: int = INVALID_REQUEST


class DecodeError(KafkaPyError, ValueError):
    """Bytes that are not a valid encoding of the message they claim to be.

    ``offset`` is the byte offset into the buffer handed to the decoder where
    decoding failed; ``api_key``/``api_version`` are filled in as soon as the
    layer that knows them sees the error.
    """

    error_code = CORRUPT_MESSAGE

    def __init__(
        self,
        reason: str,
        *,
        offset: int | None = None,
        api_key: int | None = None,
        api_version: int | None = None,
        field: str | None = None,
        truncated: bool = False,
    ) -> None:
        self.reason = reason
        self.offset = offset
        self.api_key = api_key
        self.api_version = api_version
        self.field = field
        # True when the input simply ended early (a capture's snap length, a
        # partial read) rather than containing contradictory bytes.
        self.truncated = truncated
        super().__init__(reason)

    def __str__(self) -> str:
        where = []
        if self.api_key is not None:
            from kafkapy.protocol.catalogue import api_name  # lazy: errors is imported first

            where.append(f"{api_name(self.api_key)} (key {self.api_key})")
        if self.api_version is not None:
            where.append(f"v{self.api_version}")
        if self.field:
            where.append(f"field {self.field}")
        if self.offset is not None:
            where.append(f"byte offset {self.offset}")
        return f"{self.reason} [{', '.join(where)}]" if where else self.reason


class EncodeError(KafkaPyError, ValueError):
    """A value that cannot be encoded in the requested message version."""

    def __init__(self, reason: str, *, field: str | None = None) -> None:
        self.reason = reason
        self.field = field
        super().__init__(f"{reason} (field {field})" if field else reason)
