"""What a test seeds a broker with: topics, their configs and records, as plain data.

One shape serves three doors: ``broker.seed(mapping)``, ``kafkapy serve --seed FILE`` (JSON,
or YAML when PyYAML is installed) and the ``kafka_seed`` pytest marker; ``broker.snapshot()``
answers in the same shape, so a snapshot can be seeded again::

    {"orders": {"partitions": 3, "replication_factor": 1, "config": {"cleanup.policy": "compact"},
                "records": [{"key": "k", "value": "v", "headers": {"h": "x"},
                             "partition": 0, "timestamp": 1700000000000}]}}

Every field but the topic name is optional. A record without ``partition`` goes where Kafka's
Java client would put it: ``murmur2(key) % partitions``, and unkeyed records rotate. Text is
encoded as UTF-8; bytes are taken as they are. This module only reads and checks the data
(SeedError, one line, for anything wrong); the broker does the creating and appending.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from kafkapy.errors import KafkaPyError
from kafkapy.protocol.partitioner import partition_for_key

__all__ = ["RecordSeed", "SeedError", "TopicSeed", "load_seed_file", "parse_seed", "parse_seed_text",
           "placed"]

_TOPIC_FIELDS = frozenset({"partitions", "replication_factor", "config", "records"})
_RECORD_FIELDS = frozenset({"key", "value", "headers", "partition", "timestamp"})


class SeedError(KafkaPyError):
    """Seed data that cannot be used; the message names the topic and record."""


@attrs.frozen
class RecordSeed:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int | None = None  # None: by key, as the Java client's partitioner
    timestamp: int | None = None  # None: the time of seeding


@attrs.frozen
class TopicSeed:
    name: str
    partitions: int | None = None  # None: the broker's num.partitions
    replication_factor: int | None = None  # None: the broker's default.replication.factor
    config: Mapping[str, str] = attrs.field(factory=dict)
    records: tuple[RecordSeed, ...] = ()


def _bytes(value: Any, where: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise SeedError(f"{where}: expected text, bytes or null, not {type(value).__name__}")


# The widest each field is on the wire: partition counts and indexes are INT32 (CreateTopics,
# Produce), replication factors INT16 (CreateTopics), timestamps INT64 (the record batch).
INT16_MAX, INT32_MAX, INT64_MAX = 2**15 - 1, 2**31 - 1, 2**63 - 1


def _int(value: Any, where: str, low: int, high: int = INT32_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SeedError(f"{where}: expected an integer of at least {low}, not {value!r}")
    if value > high:
        raise SeedError(f"{where}: {value} is more than Kafka's {high}")
    return value


def _record(raw: Any, where: str, partitions: int | None) -> RecordSeed:
    if not isinstance(raw, Mapping):
        raise SeedError(f"{where}: expected a mapping with key/value/headers/partition/timestamp")
    unknown = set(raw) - _RECORD_FIELDS
    if unknown:
        raise SeedError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    headers_raw = raw.get("headers") or {}
    if isinstance(headers_raw, Mapping):
        pairs = list(headers_raw.items())
    elif isinstance(headers_raw, Sequence) and all(isinstance(h, Sequence) and len(h) == 2
                                                   for h in headers_raw):
        pairs = [(h[0], h[1]) for h in headers_raw]  # a list of pairs keeps repeated header names
    else:
        raise SeedError(f"{where}: headers must be a mapping or a list of [name, value] pairs")
    headers = []
    for name, value in pairs:
        if not isinstance(name, str):
            raise SeedError(f"{where}: a header name must be text, not {name!r}")
        headers.append((name, _bytes(value, f"{where} header {name!r}")))
    partition = raw.get("partition")
    if partition is not None:
        partition = _int(partition, f"{where} partition", 0)
        if partitions is not None and partition >= partitions:
            raise SeedError(f"{where}: partition {partition} of a topic with {partitions} partitions")
    timestamp = raw.get("timestamp")
    return RecordSeed(_bytes(raw.get("key"), f"{where} key"), _bytes(raw.get("value"), f"{where} value"),
                      tuple(headers), partition,
                      None if timestamp is None else _int(timestamp, f"{where} timestamp", 0, INT64_MAX))


def _topic(name: Any, raw: Any) -> TopicSeed:
    if not isinstance(name, str) or not name:
        raise SeedError(f"a topic name must be non-empty text, not {name!r}")
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        raise SeedError(f"topic {name!r}: expected a mapping with "
                        "partitions/replication_factor/config/records")
    unknown = set(raw) - _TOPIC_FIELDS
    if unknown:
        raise SeedError(f"topic {name!r}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    partitions = raw.get("partitions")
    partitions = None if partitions is None else _int(partitions, f"topic {name!r} partitions", 1)
    factor = raw.get("replication_factor")
    factor = None if factor is None else _int(factor, f"topic {name!r} replication_factor", 1, INT16_MAX)
    config = raw.get("config") or {}
    if not isinstance(config, Mapping):
        raise SeedError(f"topic {name!r}: config must be a mapping of Kafka topic config names to values")
    records_raw = raw.get("records") or []
    if isinstance(records_raw, (str, bytes)) or not isinstance(records_raw, Sequence):
        raise SeedError(f"topic {name!r}: records must be a list")
    records = tuple(_record(r, f"topic {name!r} record {i}", partitions) for i, r in enumerate(records_raw))
    return TopicSeed(name, partitions, factor, {str(k): _config_text(v) for k, v in config.items()}, records)


def _config_text(value: Any) -> str:
    # Kafka's configs are text on the wire; YAML and JSON give booleans and numbers as such.
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_seed(data: Any) -> list[TopicSeed]:
    """The topics ``data`` (``{topic: {...}}``) asks for, checked; SeedError if anything is off."""
    if not isinstance(data, Mapping):
        raise SeedError("seed data must be a mapping of topic name to its partitions, config and records")
    return [_topic(name, raw) for name, raw in data.items()]


def load_seed_file(path: str | Path) -> list[TopicSeed]:
    """A seed file: JSON, or YAML (``.yaml``/``.yml``) when PyYAML is installed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SeedError(f"cannot read seed file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SeedError(f"seed file {path} is not UTF-8 text: {exc}") from None
    return parse_seed_text(text, yaml=path.suffix.lower() in (".yaml", ".yml"), source=str(path))


def parse_seed_text(text: str, *, yaml: bool = False, source: str = "seed data") -> list[TopicSeed]:
    """Seed data as JSON text, or YAML (PyYAML needed); ``source`` names it in errors."""
    if yaml:
        try:
            import yaml as pyyaml  # type: ignore[import-untyped]
        except ImportError:
            raise SeedError(f"{source}: YAML seed files need PyYAML (pip install pyyaml); "
                            "JSON needs nothing") from None
        try:
            data = pyyaml.safe_load(text)
        except (pyyaml.YAMLError, RecursionError) as exc:  # RecursionError: deep nesting
            raise SeedError(f"{source}: not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: deep nesting
            raise SeedError(f"{source}: not valid JSON: {exc}") from None
    return parse_seed(data)


def placed(records: Sequence[RecordSeed], partitions: int) -> dict[int, list[RecordSeed]]:
    """Records by partition: as given, else ``murmur2(key) % partitions`` (the Java client's
    default partitioner, so a seeded key lands where a producer would put it), unkeyed in turn."""
    out: dict[int, list[RecordSeed]] = {}
    turn = 0
    for record in records:
        partition = record.partition
        if partition is None:
            if record.key is not None:
                partition = partition_for_key(record.key, partitions)
            else:
                partition, turn = turn % partitions, turn + 1
        if partition >= partitions:
            raise SeedError(f"a record for partition {partition} of a topic with {partitions} partitions")
        out.setdefault(partition, []).append(record)
    return out
