"""The control endpoint's one error: an HTTP status and a one-line message for the client."""

from __future__ import annotations

from http import HTTPStatus

from kafkapy.errors import KafkaPyError

__all__ = ["ControlError"]


class ControlError(KafkaPyError):
    """A request the endpoint refuses: ``status`` (4xx) and a message naming what was wrong."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = int(status)
