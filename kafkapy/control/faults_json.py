"""Fault rules as JSON, for the control endpoint: a FaultRule (kafkapy.faults) from a mapping.

API keys and error codes are given by name, as kafkapy's own code writes them: an ``ApiKey``
member (``"PRODUCE"``) or Kafka's own API name (``"Produce"``), an ``ErrorCode`` member
(``"NOT_LEADER_OR_FOLLOWER"``), case-insensitive either way. The action is a tagged mapping::

    {"api": "Produce", "topic": "orders", "times": 2,
     "action": {"type": "error", "error": "NOT_LEADER_OR_FOLLOWER"}}

``transactional_id`` and ``group`` match the requests that carry that id, whatever the API
(kafkapy.faults.carried_ids).

``when`` (a Python predicate) has no JSON form. Anything wrong is one ControlError naming the
field, raised before a rule is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafkapy.control.errors import ControlError
from kafkapy.errors import ErrorCode
from kafkapy.faults import (
    Delay,
    DropConnection,
    ErrorAnswer,
    FaultAction,
    FaultRule,
    Stall,
    Throttle,
    TruncateResponse,
)
from kafkapy.protocol import api_name
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["ACTION_TYPES", "RULE_FIELDS", "api_key_named", "error_code_named", "fault_rule", "rule_json"]

RULE_FIELDS = frozenset({"api", "versions", "client_id", "connection", "topic", "partition",
                         "transactional_id", "group", "action",
                         "times", "every", "probability", "seed", "broker"})

_API_BY_NAME = {**{key.name.lower(): key for key in ApiKey},
                **{api_name(key).lower(): key for key in ApiKey}}


def api_key_named(name: Any) -> ApiKey:
    key = _API_BY_NAME.get(name.lower()) if isinstance(name, str) else None
    if key is None:
        raise ControlError(f"api: unknown API {name!r}; give an ApiKey name such as \"PRODUCE\" "
                           "or Kafka's name such as \"Produce\"")
    return key


def error_code_named(name: Any) -> ErrorCode:
    code = ErrorCode.__members__.get(name.upper()) if isinstance(name, str) else None
    if code is None:
        raise ControlError(f"action.error: unknown error code {name!r}; give an ErrorCode name such as "
                           "\"NOT_LEADER_OR_FOLLOWER\"")
    return code


def _number(raw: Mapping[str, Any], field: str, where: str, *, integer: bool = False,
            low: float | None = None) -> Any:
    value = raw.get(field)
    kinds = (int,) if integer else (int, float)
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ControlError(f"{where}{field}: expected {kind}, not {value!r}")
    if low is not None and value < low:
        raise ControlError(f"{where}{field}: expected {kind} of at least {low:g}, not {value!r}")
    return value


def _error(raw: Mapping[str, Any]) -> FaultAction:
    return ErrorAnswer(error_code_named(raw.get("error")))


def _delay(raw: Mapping[str, Any]) -> FaultAction:
    return Delay(float(_number(raw, "seconds", "action.", low=0)))


def _throttle(raw: Mapping[str, Any]) -> FaultAction:
    return Throttle(_number(raw, "milliseconds", "action.", integer=True, low=0))


def _drop(raw: Mapping[str, Any]) -> FaultAction:
    when = raw.get("when", "before")
    if when not in ("before", "after"):
        raise ControlError(f"action.when: expected \"before\" or \"after\", not {when!r}")
    return DropConnection(when)


def _truncate(raw: Mapping[str, Any]) -> FaultAction:
    return TruncateResponse(float(_number(raw, "keep", "action.")) if "keep" in raw else 0.5)


def _stall(raw: Mapping[str, Any]) -> FaultAction:
    return Stall()


# type -> (fields it takes, builder): the table the OpenAPI document's FaultAction mirrors.
ACTION_TYPES: dict[str, tuple[frozenset[str], Callable[[Mapping[str, Any]], FaultAction]]] = {
    "error": (frozenset({"error"}), _error),
    "delay": (frozenset({"seconds"}), _delay),
    "throttle": (frozenset({"milliseconds"}), _throttle),
    "drop": (frozenset({"when"}), _drop),
    "truncate": (frozenset({"keep"}), _truncate),
    "stall": (frozenset(), _stall),
}


def _action(raw: Any) -> FaultAction:
    if not isinstance(raw, Mapping):
        raise ControlError(f"action: expected a mapping with a \"type\" ({', '.join(ACTION_TYPES)})")
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in ACTION_TYPES:
        raise ControlError(f"action.type: expected one of {', '.join(ACTION_TYPES)}, not {kind!r}")
    fields, build = ACTION_TYPES[kind]
    unknown = set(raw) - fields - {"type"}
    if unknown:
        raise ControlError(f"action: unknown field(s) for {kind!r}: {', '.join(sorted(map(str, unknown)))}")
    return build(raw)


def _optional_text(raw: Mapping[str, Any], field: str) -> str | None:
    value = raw.get(field)
    if value is not None and not isinstance(value, str):
        raise ControlError(f"{field}: expected text, not {value!r}")
    return value


def _optional_int(raw: Mapping[str, Any], field: str) -> int | None:
    return None if raw.get(field) is None else int(_number(raw, field, "", integer=True))


def fault_rule(raw: Any) -> FaultRule:
    """The FaultRule ``raw`` describes (the module docstring's shape); ControlError if it is off."""
    if not isinstance(raw, Mapping):
        raise ControlError("a fault rule is a JSON object with an \"action\" (and api, topic, times, ...)")
    unknown = set(raw) - RULE_FIELDS
    if unknown:
        raise ControlError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}; "
                           f"a rule takes {', '.join(sorted(RULE_FIELDS))}")
    if "action" not in raw:
        raise ControlError("action: missing; e.g. "
                           "{\"type\": \"error\", \"error\": \"NOT_LEADER_OR_FOLLOWER\"}")
    api = raw.get("api")
    if api == []:
        raise ControlError("api: an empty list matches nothing; leave api out to match every API")
    keys = None if api is None else [api_key_named(n) for n in (api if isinstance(api, list) else [api])]
    versions = raw.get("versions")
    if versions is not None:
        if (not isinstance(versions, list) or len(versions) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in versions)
                or versions[0] > versions[1]):
            raise ControlError(f"versions: expected [low, high] (inclusive, low <= high), not {versions!r}")
        versions = (versions[0], versions[1])
    probability = raw.get("probability", 1.0)
    if isinstance(probability, bool) or not isinstance(probability, (int, float)):
        raise ControlError(f"probability: expected a number in [0, 1], not {probability!r}")
    every = raw.get("every", 1)
    if isinstance(every, bool) or not isinstance(every, int):
        raise ControlError(f"every: expected an integer, not {every!r}")
    try:
        return FaultRule(_action(raw["action"]), api=keys, versions=versions,
                         client_id=_optional_text(raw, "client_id"),
                         connection=_optional_text(raw, "connection"), topic=_optional_text(raw, "topic"),
                         partition=_optional_int(raw, "partition"),
                         transactional_id=_optional_text(raw, "transactional_id"),
                         group=_optional_text(raw, "group"), times=_optional_int(raw, "times"),
                         every=every, probability=float(probability), seed=_optional_int(raw, "seed"))
    except ValueError as exc:  # FaultRule's and the actions' own checks (times >= 1, keep < 1, ...)
        raise ControlError(str(exc)) from None
    except OverflowError:  # an integer too large for a float, where seconds or a fraction go
        raise ControlError("a number in the rule is too large") from None


def _action_json(action: FaultAction) -> dict[str, Any]:
    if isinstance(action, ErrorAnswer):
        return {"type": "error", "error": action.code.name}
    if isinstance(action, Delay):
        return {"type": "delay", "seconds": action.seconds}
    if isinstance(action, Throttle):
        return {"type": "throttle", "milliseconds": action.milliseconds}
    if isinstance(action, DropConnection):
        return {"type": "drop", "when": action.when}
    if isinstance(action, TruncateResponse):
        return {"type": "truncate", "keep": action.keep}
    return {"type": "stall"}


def rule_json(rule: FaultRule) -> dict[str, Any]:
    """``rule`` in the shape ``fault_rule`` reads (API names Kafka's), fields left out when unset."""
    out: dict[str, Any] = {"action": _action_json(rule.action)}
    if rule.api is not None:
        out["api"] = sorted(api_name(key) for key in rule.api)
    if rule.versions is not None:
        out["versions"] = list(rule.versions)
    for field in ("client_id", "connection", "topic", "partition", "transactional_id", "group", "times",
                  "seed"):
        if getattr(rule, field) is not None:
            out[field] = getattr(rule, field)
    out["every"], out["probability"] = rule.every, rule.probability
    return out
