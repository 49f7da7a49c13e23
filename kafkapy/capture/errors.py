"""The capture decoder's one exception type.

A capture file is remote input like any other: whatever is wrong with it
(random bytes, a corrupt header, a length field that points past the end)
surfaces as a CaptureError, never as struct.error or IndexError, so a caller
can catch one type around a whole capture.
"""

from __future__ import annotations

from kafkapy.errors import ErrorCode, KafkaPyError

__all__ = ["CaptureError"]


class CaptureError(KafkaPyError, ValueError):
    """A capture file that cannot be read further.

    ``offset`` is the byte offset in the file where the problem was found;
    ``truncated`` is True when the file simply ended early rather than
    containing contradictory bytes.
    """

    error_code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, reason: str, *, offset: int | None = None, truncated: bool = False) -> None:
        self.reason = reason
        self.offset = offset
        self.truncated = truncated
        super().__init__(reason if offset is None else f"{reason} (file offset {offset})")
