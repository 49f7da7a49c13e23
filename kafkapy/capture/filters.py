"""Which rows a decode keeps: ``kafkapy decode --api/--topic/--client-id/--errors-only``.

An analyst's first questions are "what failed" and "what did this client or topic do"; tshark
answers them with a display filter (``-Y``), kafkapy with these options, applied to each row
before it is written so a large capture's output stays small. A row is kept when it passes
every option given:

    api          its API is one of these (names or keys, as ``bodies`` takes them)
    topic        its request names one of these topics (the row's ``topics``)
    client_id    its request header's client id is one of these
    errors_only  its response has a non-zero error code (the row's ``errors``)

``topic`` and ``errors_only`` read decoded bodies: a row whose bodies were not decoded
(``bodies``) has no topics and no errors, so it never matches them. A row that is no exchange
(a file that is not a capture, or is cut short) is always kept: it reports a problem with the
input, not traffic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafkapy.capture.options import body_api_keys

__all__ = ["RowFilter"]

# positions in kafkapy.capture.rows.COLUMNS (a test holds them to it)
_CONNECTION_ID, _API_KEY, _CLIENT_ID, _ERRORS, _TOPICS = 3, 4, 8, 12, 18


def _names(values: str | Iterable[str] | None, option: str) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = (values,)
    names = frozenset(values)
    if not names or any(not isinstance(v, str) for v in names):
        raise ValueError(f"{option} takes one or more strings, not {values!r}")
    return names


class RowFilter:
    """A predicate on row value tuples (:func:`kafkapy.capture.rows.exchange_values`), built from
    the options above; a bad value is a ValueError at construction. ``seen`` counts the rows it
    was asked about, so a caller can tell "nothing matched" from "nothing there"."""

    def __init__(self, *, api: Iterable[int | str] | int | str | None = None,
                 topic: str | Iterable[str] | None = None, client_id: str | Iterable[str] | None = None,
                 errors_only: bool = False) -> None:
        if isinstance(api, str):
            api = [item.strip() for item in api.split(",")]
        elif isinstance(api, int):
            api = [api]
        self.api_keys = body_api_keys(api)
        if self.api_keys is not None and not self.api_keys:
            raise ValueError("api names no API")
        self.topics = _names(topic, "topic")
        self.client_ids = _names(client_id, "client_id")
        if not isinstance(errors_only, bool):
            raise ValueError(f"errors_only is True or False, not {errors_only!r}")
        self.errors_only = errors_only
        self.seen = 0

    @property
    def active(self) -> bool:
        """Whether any option was given (else every row passes)."""
        return (self.api_keys is not None or self.topics is not None or self.client_ids is not None
                or self.errors_only)

    def __call__(self, values: tuple[Any, ...]) -> bool:
        self.seen += 1
        if values[_API_KEY] is None and values[_CONNECTION_ID] is None:
            return True  # the file's own problem, not an exchange
        if self.api_keys is not None and values[_API_KEY] not in self.api_keys:
            return False
        if self.client_ids is not None and values[_CLIENT_ID] not in self.client_ids:
            return False
        if self.errors_only and not values[_ERRORS]:
            return False
        if self.topics is not None:
            topics = values[_TOPICS]
            return bool(topics) and not self.topics.isdisjoint(topics)
        return True
