"""Kafka's config validators as values: the bounds and choices its ConfigDef holds a setting to,
each able to say, in Kafka's words, why a typed value is refused.

A validator is a callable ``check(value) -> problem | None`` (the ``Check`` the config tables
take), and :meth:`Validator.refusal` gives Kafka's whole ConfigException line, "Invalid value 0
for configuration num.io.threads: Value must be at least 1", naming the value as Java prints it
(a list's items one at a time, as Kafka's ValidList checks them). The vocabulary is Kafka's:
Range.atLeast / Range.between, ValidString.in (and its case-insensitive form), ValidList.in,
NonEmptyString, NonNullValidator, and the few special validators of broker keys that are cheap
to state (-1 or a range, the controller quorum's host:port lists). None is a setting left unset
here (Kafka's properties cannot hold a null), so only NonNull refuses it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import attrs

__all__ = ["AtLeast", "Between", "EachOneOf", "HostPorts", "MinusOneOr", "NonEmptyString", "NonNull", "OneOf",
           "Validator", "java_double", "java_text"]


def java_double(value: float) -> str:
    """A double as Java's Double.toString writes it (Kafka's messages and DescribeConfigs show
    values so): plain from 10^-3 up to 10^7, else scientific ("1.0E7", "1.7976931348623157E308")."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def java_text(value: Any) -> str:
    """A typed config value as Java's toString prints it in a ConfigException."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(java_text, value)) + "]"
    return str(value)


class Validator:
    """One of Kafka's validators. ``problem`` is ConfigDef's reason (None: the value is fine);
    subclasses whose message is not ConfigDef's "Invalid value ..." line override ``refusal``."""

    def problem(self, value: Any) -> str | None:
        raise NotImplementedError

    def __call__(self, value: Any) -> str | None:
        return self.problem(value)

    def refusal(self, name: str, value: Any) -> str | None:
        """Kafka's ConfigException message for ``value`` of setting ``name``, or None."""
        problem = self.problem(value)
        if problem is None:
            return None
        return f"Invalid value {java_text(value)} for configuration {name}: {problem}"


@attrs.frozen
class AtLeast(Validator):
    """Range.atLeast: the bound is printed as Kafka's source writes it (1, 0.5)."""

    low: int | float

    def problem(self, value: Any) -> str | None:
        if value is None or value >= self.low:
            return None
        return f"Value must be at least {java_text(self.low)}"


@attrs.frozen
class Between(Validator):
    """Range.between, both bounds inclusive."""

    low: int | float
    high: int | float

    def problem(self, value: Any) -> str | None:
        if value is None:
            return None
        if value < self.low:
            return f"Value must be at least {java_text(self.low)}"
        if value > self.high:
            return f"Value must be no more than {java_text(self.high)}"
        return None


@attrs.frozen
class OneOf(Validator):
    """ValidString.in, or CaseInsensitiveValidString.in with ``ignore_case`` (whose message lists
    the choices upper-cased, in the order of Kafka's HashSet: give them in that order)."""

    choices: tuple[str, ...]
    ignore_case: bool = False

    def problem(self, value: Any) -> str | None:
        if value is None:
            return None
        if self.ignore_case:
            if str(value).upper() in {c.upper() for c in self.choices}:
                return None
            return "String must be one of (case insensitive): " + ", ".join(c.upper() for c in self.choices)
        return None if value in self.choices else "String must be one of: " + ", ".join(self.choices)


@attrs.frozen
class EachOneOf(Validator):
    """ValidList.in: every item of a list one of the choices; the refusal names the first bad item."""

    choices: tuple[str, ...]

    def _bad(self, value: Iterable[str] | None) -> str | None:
        return next((item for item in value or () if item not in self.choices), None)

    def problem(self, value: Any) -> str | None:
        return None if self._bad(value) is None else "String must be one of: " + ", ".join(self.choices)

    def refusal(self, name: str, value: Any) -> str | None:
        bad = self._bad(value)
        return None if bad is None else OneOf(self.choices).refusal(name, bad)


@attrs.frozen
class NonEmptyString(Validator):
    """ConfigDef.NonEmptyString: unset is fine, an empty string is not."""

    def problem(self, value: Any) -> str | None:
        return "String must be non-empty" if value == "" else None


@attrs.frozen
class NonNull(Validator):
    """ConfigDef.NonNullValidator (Kafka prints the value as the word null)."""

    def problem(self, value: Any) -> str | None:
        return "entry must be non null" if value is None else None


@attrs.frozen
class MinusOneOr(Validator):
    """-1 (Kafka's "default" or "as another setting"), or a value in [low, high]; ``message`` is
    the validator's own (CompressionType's level validators, RemoteLogManagerConfig's pool sizes)."""

    low: int
    high: int | None
    message: str

    def problem(self, value: Any) -> str | None:
        if value is None or value == -1 or (value >= self.low and (self.high is None or value <= self.high)):
            return None
        return self.message


# Kafka's Utils HOST_PORT_PATTERN and VALID_HOST_CHARACTERS: [scheme://][\[]host[\]]:port
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")
_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")


@attrs.frozen
class HostPorts(Validator):
    """QuorumConfig's validators of controller.quorum.voters (``{id}@{host}:{port}`` entries,
    ``with_ids``) and controller.quorum.bootstrap.servers (``{host}:{port}``), in their words."""

    with_ids: bool

    def problem(self, value: Any) -> str | None:
        return self.refusal("", value)

    def refusal(self, name: str, value: Any) -> str | None:
        form = "`{id}@{host}:{port}`." if self.with_ids else '"{host}:{port}"'
        for entry in value or ():
            address = entry
            if self.with_ids:
                parts = entry.split("@")
                while parts and not parts[-1]:
                    parts.pop()  # Java's String.split drops trailing empty strings
                if len(parts) != 2:
                    return f"Invalid configuration value for {name}. Each entry should be in the form {form}"
                voter_id, address = parts
                if not re.fullmatch(r"[+-]?[0-9]+", voter_id):
                    return f"Failed to parse voter ID as an integer from {voter_id}"
            found = _HOST_PORT.fullmatch(address)
            where = f"entry {entry} for the configuration {name}" if self.with_ids else \
                f"{entry} for the configuration {name}"
            if found is None or not _HOST.fullmatch(found.group(1)):
                return f"Failed to parse host name from {where}. Each entry should be in the form {form}"
        return None
