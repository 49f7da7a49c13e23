"""Fault rules as values: what requests a rule matches, how often it fires, and what it does.

A rule is declarative and immutable (so it can be shared, printed and reused across tests);
the counting it needs (matches seen, times fired, its RNG) lives in the handle the injector
returns for it (kafkapy.faults.injector).

Matching: every criterion given must hold (None matches anything). ``topic``/``partition``
hold when the request names that topic (and partition) anywhere (kafkapy.faults.matching);
``transactional_id``/``group`` when the request carries that id in whichever field its API and
version keep it (kafkapy.faults.carried_ids), so a rule on them matches only the APIs that do.

Firing, among the requests that match: the ``every``-th of them (1: each), then with
``probability`` from an RNG seeded with ``seed`` (so a failing test replays the same faults),
and at most ``times`` times (None: no limit).

Every field is checked when the rule is built, in the test's own line: a rule is carried out on
the broker's loop, where a wrong value (an error code given as text, a delay as a string) would
fail the request it fires on, close the client's connection and show only in the broker's log.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

import attrs

from kafkapy.errors import ErrorCode
from kafkapy.faults.carried_ids import IdKind, apis_carrying
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["Delay", "DropConnection", "ErrorAnswer", "FaultAction", "FaultRule", "Stall", "Throttle",
           "TruncateResponse"]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@attrs.frozen
class ErrorAnswer:
    """Answer with ``code`` instead of handling the request: per partition where the response has
    partitions, per topic or group where it has those, else at the top
    (kafkapy.protocol.error_answers). The handler does not run: nothing is written."""

    code: ErrorCode

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.code, ErrorCode):
            named = f"ErrorCode.{self.code if isinstance(self.code, str) else 'NOT_LEADER_OR_FOLLOWER'}"
            raise TypeError(f"ErrorAnswer takes an ErrorCode (kafkapy.errors), such as {named}, "
                            f"not {self.code!r}")


@attrs.frozen
class Delay:
    """Handle the request, then hold the answer ``seconds`` (and, since a connection answers in
    order, every request behind it on that connection)."""

    seconds: float

    def __attrs_post_init__(self) -> None:
        if not _is_number(self.seconds) or not self.seconds >= 0:
            raise ValueError(f"Delay takes seconds as a number of at least 0, not {self.seconds!r}")


@attrs.frozen
class Throttle:
    """Handle the request and answer at once with ``throttle_time_ms`` set, then mute the
    connection for that long, as Kafka's quotas do (KIP-219): the next request on it waits."""

    milliseconds: int

    def __attrs_post_init__(self) -> None:
        # throttle_time_ms is an int32 in every response that has it
        if not isinstance(self.milliseconds, int) or isinstance(self.milliseconds, bool) \
                or not 0 <= self.milliseconds <= 2**31 - 1:
            raise ValueError(f"Throttle takes milliseconds as an integer in [0, 2**31 - 1], "
                             f"not {self.milliseconds!r}")


@attrs.frozen
class DropConnection:
    """Close the connection without an answer: ``before`` the handler (nothing happens) or
    ``after`` it (the request took effect, but the client never hears so: retries then test
    idempotence)."""

    when: Literal["before", "after"] = "before"

    def __attrs_post_init__(self) -> None:
        if self.when not in ("before", "after"):
            raise ValueError(f"DropConnection takes \"before\" or \"after\", not {self.when!r}")


@attrs.frozen
class TruncateResponse:
    """Handle the request and send a well-framed response whose body is cut to ``keep`` (a
    fraction of its bytes): the client cannot parse it."""

    keep: float = 0.5

    def __attrs_post_init__(self) -> None:
        if not _is_number(self.keep) or not 0.0 <= self.keep < 1.0:
            raise ValueError(f"keep must be in [0, 1), not {self.keep}")


@attrs.frozen
class Stall:
    """Never answer while the rule is installed; once it is removed, the request goes on."""


FaultAction = ErrorAnswer | Delay | Throttle | DropConnection | TruncateResponse | Stall
_ACTIONS = (ErrorAnswer, Delay, Throttle, DropConnection, TruncateResponse, Stall)


def _id_text(field: str) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(rule: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{field} takes the id as text, such as {field}=\"orders-tx\", not {value!r}")
    return check


def _api_keys(value: ApiKey | Collection[ApiKey] | None) -> frozenset[ApiKey] | None:
    if value is None:
        return None
    if isinstance(value, str):  # a collection of letters, each "not a valid ApiKey"
        raise TypeError(f"api takes an ApiKey (kafkapy.protocol.api_keys), such as ApiKey.PRODUCE, "
                        f"or a collection of them, not {value!r}")
    if isinstance(value, int):
        return frozenset({ApiKey(value)})
    keys = frozenset(ApiKey(key) for key in value)
    if not keys:
        raise ValueError("api: an empty collection matches nothing; leave api out to match every API")
    return keys


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
    # Last, so that the positional order of the fields above is what it was before these came.
    transactional_id: str | None = attrs.field(default=None, validator=_id_text("transactional_id"))
    group: str | None = attrs.field(default=None, validator=_id_text("group"))

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.action, _ACTIONS):
            raise TypeError(f"a FaultRule's action is one of {', '.join(a.__name__ for a in _ACTIONS)}, "
                            f"not {self.action!r}")
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be at least 1, not {self.times}")
        if self.every < 1:
            raise ValueError(f"every must be at least 1, not {self.every}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], not {self.probability}")
        if self.partition is not None and self.topic is None:
            raise ValueError("a partition is matched within a topic: give topic= too")
        for kind, wanted in ((IdKind.TRANSACTION, self.transactional_id), (IdKind.GROUP, self.group)):
            if wanted is not None and self.api is not None and not self.api & apis_carrying(kind):
                raise ValueError(f"{kind.value}: no request of {', '.join(sorted(k.name for k in self.api))} "
                                 f"carries one, so the rule would match nothing")
