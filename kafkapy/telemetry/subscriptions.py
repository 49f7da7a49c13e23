"""Client-metrics subscriptions (KIP-714): which clients push which metrics, how often.

A subscription is a named ``CLIENT_METRICS`` config resource, stored where Kafka keeps it
(ZooKeeper ``/config/client-metrics/<name>``), with Kafka's three keys: ``metrics`` (name
prefixes, ``*`` for all), ``interval.ms`` (100 to 3,600,000; default 300,000) and ``match``
(``attribute=regex`` items, every one of which must match the client; a later item for an
attribute replaces an earlier one). The values are read as Kafka's ConfigDef reads them (LIST and
INT), so the same strings are accepted and refused. A client gets the union of
the metrics of the subscriptions it matches and the shortest of their intervals; its subscription
id is Kafka's: the CRC-32C of that set and interval, xor the client instance id's hash.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping

import attrs

from kafkapy.errors import ErrorCode
from kafkapy.protocol.crc32c import crc32c
from kafkapy.server.patterns import PatternError, Regex, compile_java
from kafkapy.store.base import encode_uuid

__all__ = ["ALL_METRICS", "DEFAULT_INTERVAL_MS", "MATCH_ATTRIBUTES", "ClientAttributes", "Subscription",
           "SubscriptionError", "effective_subscription", "parse_subscription"]

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
CLIENT_INSTANCE_ID, CLIENT_ID = "client_instance_id", "client_id"
CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION = "client_software_name", "client_software_version"
CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT = "client_source_address", "client_source_port"
MATCH_ATTRIBUTES = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                              CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})


class SubscriptionError(ValueError):
    """A subscription's config is not one Kafka would accept; ``code`` is Kafka's answer to it."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code


@attrs.frozen
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, Regex], ...]

    def matches(self, client: ClientAttributes) -> bool:
        values = client.values()
        return all((value := values.get(attribute)) is not None and pattern.matches(value)
                   for attribute, pattern in self.match)


@attrs.frozen
class ClientAttributes:
    """What a subscription's ``match`` can test, as Kafka's ClientMetricsInstanceMetadata has it."""

    client_instance_id: uuid.UUID
    client_id: str | None
    client_source_address: str
    client_source_port: int
    # What the connection's ApiVersions v3+ declared (ConnectionInfo.client_software): "unknown"
    # when it declared nothing, as Kafka's ClientInformation has it.
    client_software_name: str = "unknown"
    client_software_version: str = "unknown"

    def values(self) -> dict[str, str | None]:
        """The attributes as strings, as Kafka matches them: the instance id as Kafka's Uuid
        prints it (URL-safe base64, 22 characters), as clients show it."""
        return {CLIENT_INSTANCE_ID: encode_uuid(self.client_instance_id), CLIENT_ID: self.client_id,
                CLIENT_SOFTWARE_NAME: self.client_software_name,
                CLIENT_SOFTWARE_VERSION: self.client_software_version,
                CLIENT_SOURCE_ADDRESS: self.client_source_address,
                CLIENT_SOURCE_PORT: str(self.client_source_port)}


_JAVA_TRIMMED = "".join(chr(code) for code in range(0x21))  # what Java's String.trim() strips
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # Java's \s*,\s*: ASCII only
_INT32 = (-(1 << 31), (1 << 31) - 1)


def _list(raw: str) -> list[str]:
    """A LIST config's items as Kafka's ConfigDef reads them: the trimmed value split at commas
    (with the whitespace around them), empty items kept; an empty value is no items."""
    trimmed = raw.strip(_JAVA_TRIMMED)
    return _LIST_SEPARATOR.split(trimmed) if trimmed else []


def _int(raw: str) -> int | None:
    """An INT config as Kafka's ConfigDef reads it (Integer.parseInt of the trimmed value), or
    None where it is no 32-bit integer."""
    text = raw.strip(_JAVA_TRIMMED)
    # Python's int() also takes digit groups ("1_000") and other whitespace around the digits.
    if "_" in text or text != text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if _INT32[0] <= value <= _INT32[1] else None


def _split_match(item: str) -> list[str]:
    """``item.split("=")`` as Java's String.split does it: trailing empty parts dropped."""
    parts = item.split("=")
    while len(parts) > 1 and not parts[-1]:
        parts.pop()
    return parts


def parse_subscription(name: str, config: Mapping[str, str]) -> Subscription:
    """A stored or requested subscription, checked as Kafka's ClientMetricsConfigs checks it."""
    if not name:
        raise SubscriptionError("Subscription name can't be empty")
    unknown = sorted(set(config) - {METRICS, INTERVAL_MS, MATCH})
    if unknown:
        raise SubscriptionError(f"Unknown client metrics configuration: {unknown[0]}")
    interval_ms = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in config:
        parsed = _int(config[INTERVAL_MS])
        if parsed is None:  # Kafka's ConfigException, which its controller answers INVALID_CONFIG
            raise SubscriptionError(f"Invalid value {config[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                                    "Not a number of type INT", ErrorCode.INVALID_CONFIG)
        interval_ms = parsed
        if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
            raise SubscriptionError(f"Invalid value {interval_ms} for {INTERVAL_MS}, interval must be "
                                    f"between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    # One pattern per attribute: a later item for the same attribute replaces an earlier one, as
    # in Kafka's map of them.
    match: dict[str, Regex] = {}
    for item in _list(config.get(MATCH, "")):
        parts = _split_match(item)
        attribute = parts[0].strip(_JAVA_TRIMMED)
        if len(parts) != 2 or attribute not in MATCH_ATTRIBUTES:
            raise SubscriptionError(f"Illegal client matching pattern: {item}", ErrorCode.INVALID_CONFIG)
        try:
            match[attribute] = compile_java(parts[1].strip(_JAVA_TRIMMED), fallback=False)
        except PatternError:
            raise SubscriptionError(f"Illegal client matching pattern: {item}",
                                    ErrorCode.INVALID_CONFIG) from None
    return Subscription(name, tuple(_list(config.get(METRICS, ""))), interval_ms, tuple(match.items()))


def _uuid_hash(client_instance_id: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the two 64-bit halves xored, then folded to 32 bits."""
    both = client_instance_id.int
    folded = (both >> 64) ^ (both & 0xFFFFFFFFFFFFFFFF)
    return ((folded >> 32) ^ folded) & 0xFFFFFFFF


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def effective_subscription(subscriptions: Iterable[Subscription],
                           client: ClientAttributes) -> tuple[tuple[str, ...], int, int]:
    """(requested metrics, push interval ms, subscription id) for a client, as Kafka computes them:
    the matched subscriptions' metrics (just ``*`` if any asks for all), their shortest interval,
    and the id from that set's Java ``toString`` and the interval."""
    metrics: set[str] = set()
    interval_ms = DEFAULT_INTERVAL_MS
    for subscription in subscriptions:
        if subscription.matches(client):
            metrics.update(subscription.metrics)
            interval_ms = min(interval_ms, subscription.interval_ms)
    if ALL_METRICS in metrics:
        metrics = {ALL_METRICS}
    requested = tuple(sorted(metrics))
    # Kafka prints a HashSet, whose order is its hash order; kafkapy prints the sorted set, so the
    # id is stable for the same subscriptions (an id only has to change when they change).
    text = "[" + ", ".join(requested) + "]" + str(interval_ms)
    subscription_id = _signed32(crc32c(text.encode()) ^ _uuid_hash(client.client_instance_id))
    return requested, interval_ms, subscription_id
