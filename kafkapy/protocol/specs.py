"""Kafka message specs (Apache Kafka's JSON dialect) read into typed objects.

Two sources, merged into one catalogue:

1. The standard catalogue shipped inside the installed kafka-python
   (``kafka/protocol/schemas/resources/*.json``). It is located with
   ``importlib.util.find_spec`` so that kafka-python's package is *not*
   executed: importing it costs ~0.6 s and pulls in socket and ssl, which this
   sans-I/O layer must not do.
2. This project's own files in ``protocol_specs/`` (packaged into the wheel as
   ``kafkapy/protocol_specs``), which fill the keys kafka-python lacks and hold
   the seed messages. A standard key present in both comes from kafka-python.

kafkapy extends the dialect in two places, both only for the seed messages:
``"lengthType": "int16"`` (an array whose count is an int16) and
``"presentIfRemaining": true`` (a trailing field decoded only if bytes remain).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from kafkapy.protocol.versions import VersionRange

__all__ = [
    "FieldSpec",
    "MessageSpec",
    "kafka_python_spec_dir",
    "load_spec_file",
    "parse_spec",
    "project_spec_dir",
    "record_spec",
    "snake_case",
    "standard_and_project_specs",
]

_COMMENT_LINE = re.compile(r"(?m)^\s*//.*$")
_CAMEL_BOUNDARY = re.compile(r"(?<!^)(?=[A-Z])")

PRIMITIVE_TYPES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
     "string", "bytes", "records", "uuid"}
)


def snake_case(name: str) -> str:
    """Field names as kafka-python spells them, so bodies line up with its objects."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


@attrs.frozen
class FieldSpec:
    """One field of a message or struct, all versions at once."""

    name: str
    snake: str
    type: str  # "int32", "string", "[]int32", "[]SomeStruct", "SomeStruct"
    versions: VersionRange
    nullable_versions: VersionRange
    tagged_versions: VersionRange
    tag: int | None
    default: Any
    fields: tuple[FieldSpec, ...] | None
    # The request header's client_id is never compact, even in flexible versions.
    flexible_versions: VersionRange | None
    ignorable: bool
    length_type: str  # "int32" (Kafka) or "int16" (seed extension)
    present_if_remaining: bool

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.fields is not None and not self.is_array

    @property
    def is_struct_array(self) -> bool:
        return self.fields is not None and self.is_array

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions


@attrs.frozen
class MessageSpec:
    """A request, response, header or data message."""

    name: str
    type: str
    api_key: int | None
    valid_versions: VersionRange
    flexible_versions: VersionRange
    fields: tuple[FieldSpec, ...]
    source: str  # "kafka-python" or "kafkapy"
    seed: str | None = None

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions


def _parse_field(raw: Mapping[str, Any], structs: Mapping[str, list[Any]]) -> FieldSpec:
    type_ = str(raw["type"])
    element = type_[2:] if type_.startswith("[]") else type_
    sub = raw.get("fields")
    if sub is None and element not in PRIMITIVE_TYPES:
        if element not in structs:
            raise ValueError(f"field {raw['name']}: unknown type {type_!r}")
        sub = structs[element]
    versions = VersionRange.parse(raw.get("versions"))
    tagged = VersionRange.parse(raw.get("taggedVersions"))
    if raw.get("tag") is not None and not raw.get("versions"):
        versions = tagged
    flex = raw.get("flexibleVersions")
    return FieldSpec(
        name=str(raw["name"]),
        snake=snake_case(str(raw["name"])),
        type=type_,
        versions=versions,
        nullable_versions=VersionRange.parse(raw.get("nullableVersions")),
        tagged_versions=tagged,
        tag=raw.get("tag"),
        default=raw.get("default"),
        fields=None if sub is None else tuple(_parse_field(f, structs) for f in sub),
        flexible_versions=None if flex is None else VersionRange.parse(flex),
        ignorable=bool(raw.get("ignorable", False)),
        length_type=str(raw.get("lengthType", "int32")),
        present_if_remaining=bool(raw.get("presentIfRemaining", False)),
    )


def parse_spec(raw: Mapping[str, Any], source: str) -> MessageSpec:
    structs = {s["name"]: s["fields"] for s in raw.get("commonStructs", [])}
    return MessageSpec(
        name=str(raw["name"]),
        type=str(raw["type"]),
        api_key=raw.get("apiKey"),
        valid_versions=VersionRange.parse(raw.get("validVersions")),
        flexible_versions=VersionRange.parse(raw.get("flexibleVersions")),
        fields=tuple(_parse_field(f, structs) for f in raw.get("fields", [])),
        source=source,
        seed=raw.get("seed"),
    )


def load_spec_file(path: Path, source: str) -> MessageSpec:
    text = _COMMENT_LINE.sub("", path.read_text(encoding="utf-8"))
    try:
        return parse_spec(json.loads(text), source)
    except (ValueError, KeyError) as exc:
        raise ValueError(f"{path}: invalid message spec: {exc}") from exc


def kafka_python_spec_dir() -> Path:
    """kafka-python's bundled specs, found without importing kafka-python."""
    spec = importlib.util.find_spec("kafka")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("kafka-python is not installed; it provides Kafka's standard message specs")
    path = Path(next(iter(spec.submodule_search_locations))) / "protocol" / "schemas" / "resources"
    if not path.is_dir():
        raise RuntimeError(
            f"kafka-python at {path.parent} has no message specs; kafkapy needs kafka-python>=3")
    return path


def project_spec_dir() -> Path:
    """protocol_specs/: inside the wheel, or at the top of a source checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "protocol_specs", here.parent / "protocol_specs"):
        if candidate.is_dir():
            return candidate
    raise RuntimeError("kafkapy's protocol_specs directory is missing from this installation")


@functools.cache
def _record_specs() -> dict[str, MessageSpec]:
    return {spec.name: spec for spec in _iter_dir(project_spec_dir() / "records", "kafkapy")}


def record_spec(name: str) -> MessageSpec:
    """A record schema of an internal topic (``protocol_specs/records/``: the ``__consumer_offsets``
    keys and values), by name. Kept out of the API catalogue: these are record payloads, not
    requests, and their "versions" are the int16 a record's key or value starts with."""
    try:
        return _record_specs()[name]
    except KeyError:
        raise KeyError(f"no record spec {name!r} in protocol_specs/records") from None


def _iter_dir(path: Path, source: str) -> Iterator[MessageSpec]:
    for file in sorted(path.glob("*.json")):
        yield load_spec_file(file, source)


@functools.cache
def standard_and_project_specs() -> tuple[MessageSpec, ...]:
    """Every request/response/header spec, kafka-python's taking precedence per key and type."""
    seen: dict[tuple[int | None, str, str], MessageSpec] = {}
    for spec in _iter_dir(kafka_python_spec_dir(), "kafka-python"):
        seen[(spec.api_key, spec.type, spec.name)] = spec
    standard = {(s.api_key, s.type) for s in seen.values() if s.api_key is not None}
    for spec in _iter_dir(project_spec_dir(), "kafkapy"):
        if spec.api_key is not None and (spec.api_key, spec.type) in standard:
            continue
        seen[(spec.api_key, spec.type, spec.name)] = spec
    return tuple(seen.values())


