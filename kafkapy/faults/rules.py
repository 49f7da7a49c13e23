"""Fault rules as values: what requests a rule matches, how often it fires, and what it does.

A rule is declarative and immutable (so it can be shared, printed and reused across tests);
the counting it needs (matches seen, times fired, its RNG) lives in the handle the injector
returns for it (kafkapy.faults.injector).

Matching: every criterion given must hold (None matches anything). ``topic``/``partition``
hold when the request names that topic (and partition) anywhere (kafkapy.faults.matching).

Firing, among the requests that match: the ``every``-th of them (1: each), then with
``probability`` from an RNG seeded with ``seed`` (so a failing test replays the same faults),
and at most ``times`` times (None: no limit).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

import attrs

from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["Delay", "DropConnection", "ErrorAnswer", "FaultAction", "FaultRule", "Stall", "Throttle",
           "TruncateResponse"]


@attrs.frozen
class ErrorAnswer:
    """Answer with ``code`` instead of handling the request: per partition where the response has
    partitions, per topic or group where it has those, else at the top
    (kafkapy.protocol.error_answers). The handler does not run: nothing is written."""

    code: ErrorCode


@attrs.frozen
class Delay:
    """Handle the request, then hold the answer ``seconds`` (and, since a connection answers in
    order, every request behind it on that connection)."""

    seconds: float


@attrs.frozen
class Throttle:
    """Handle the request and answer at once with ``throttle_time_ms`` set, then mute the
    connection for that long, as Kafka's quotas do (KIP-219): the next request on it waits."""

    milliseconds: int


@attrs.frozen
class DropConnection:
    """Close the connection without an answer: ``before`` the handler (nothing happens) or
    ``after`` it (the request took effect, but the client never hears so: retries then test
    idempotence)."""

    when: Literal["before", "after"] = "before"


@attrs.frozen
class TruncateResponse:
    """Handle the request and send a well-framed response whose body is cut to ``keep`` (a
    fraction of its bytes): the client cannot parse it."""

    keep: float = 0.5

    def __attrs_post_init__(self) -> None:
        if not 0.0 <= self.keep < 1.0:
            raise ValueError(f"keep must be in [0, 1), not {self.keep}")


@attrs.frozen
class Stall:
    """Never answer while the rule is installed; once it is removed, the request goes on."""


FaultAction = ErrorAnswer | Delay | Throttle | DropConnection | TruncateResponse | Stall


def _api_keys(value: ApiKey | Collection[ApiKey] | None) -> frozenset[ApiKey] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return frozenset({ApiKey(value)})
    return frozenset(ApiKey(key) for key in value)


@attrs.frozen
class FaultRule:
    """One fault: when it applies (``api`` ... ``when``), how often (``every``, ``probability``,
    ``times``) and what it does (``action``). See the module docstring."""

    action: FaultAction
    api: frozenset[ApiKey] | None = attrs.field(default=None, converter=_api_keys)
    versions: tuple[int, int] | None = None  # inclusive
    client_id: str | None = None
    connection: str | None = None  # a ConnectionInfo.id
    topic: str | None = None
    partition: int | None = None
    when: Callable[[Mapping[str, Any]], bool] | None = None  # on the decoded request body
    times: int | None = None
    every: int = 1
    probability: float = 1.0
    seed: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be at least 1, not {self.times}")
        if self.every < 1:
            raise ValueError(f"every must be at least 1, not {self.every}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], not {self.probability}")
        if self.partition is not None and self.topic is None:
            raise ValueError("a partition is matched within a topic: give topic= too")
