"""Interoperability of kafkapy's codec with kafka-python 3.x, property-based.

For every API and version the catalogue takes from kafka-python's specs, requests
and responses alike, hypothesis generates a body from kafkapy's MessageSpec (the
FieldSpec tree at that version) and the body crosses between the two libraries:

* direction A: kafka-python builds and encodes the message; kafkapy decodes it
  to the generated values and re-encodes it byte for byte;
* direction B: kafkapy encodes the body; kafka-python decodes it to the
  generated values and re-encodes it byte for byte.

kafka-python is an independent implementation of the same JSON specs (its own
field walker and code generator), so agreement in both directions is strong
evidence that kafkapy speaks the wire format, not just its own dialect of it.

Values are compared in a canonical form (plain dicts, lists, bytes) built by
walking the FieldSpec tree. The canonical form papers over kafka-python's
*representations*, never over wire differences, which the byte-identity
assertions catch:

* kafka-python decodes the all-zero UUID as ``None`` (and encodes ``None`` as
  zero); kafkapy keeps ``UUID(int=0)``.
* kafka-python patches the ``*AuthorizedOperations`` int32 fields of
  MetadataResponse and DescribeClusterResponse into a ``bitfield`` type (a set
  of bit numbers, ``None`` for INT32_MIN) and renames them
  ``authorized_operations``; DescribeGroupsResponse's keeps its name. Fields are
  therefore paired by position, and a name mismatch is accepted only there.
* kafka-python's default for a tagged struct field is ``None`` where Kafka's
  (and kafkapy's) is the struct with its field defaults; kafka-python writes a
  tagged field whenever it differs from *its* default. So a tagged value equal
  to the spec default is left unset on the kafka-python object (which is what
  "absent" means for both), and an absent tag decoded by kafka-python reads as
  the spec default.
* kafka-python decodes bytes fields as bytes or memoryview; records fields are
  plain bytes there and a lazy ``Records`` on kafkapy's side (compared by bytes).

Examples per case: ``KAFKAPY_INTEROP_EXAMPLES`` (default 5) keeps the whole
file at a couple of minutes on a small machine; raise it for a deeper soak.
"""

from __future__ import annotations

import importlib
import operator
import os
import uuid
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import (
    catalogue,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkapy.protocol.records import Records
from kafkapy.protocol.specs import FieldSpec, MessageSpec

with warnings.catch_warnings():
    # kafka-python loads its specs with importlib.resources.read_text (deprecated in 3.11+).
    warnings.simplefilter("ignore", DeprecationWarning)
    for _module in ("admin", "consumer", "metadata", "producer", "sasl"):
        importlib.import_module(f"kafka.protocol.{_module}")

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import BitField
from kafka.record.default_records import DefaultRecordBatchBuilder

EXAMPLES = int(os.environ.get("KAFKAPY_INTEROP_EXAMPLES", "5"))
INTEROP_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,  # a case is cheap to rerun; keep the checkout free of .hypothesis state
)

API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35
ZERO_UUID = uuid.UUID(int=0)
INT32_MIN = -(1 << 31)
UNKNOWN_TAGS = "_unknown_tags"

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


# --- kafka-python's classes ----------------------------------------------------------------

def _walk_subclasses(cls: Any) -> Iterator[Any]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _walk_subclasses(sub)


def _kafka_python_classes() -> dict[tuple[int, str], Any]:
    found: dict[tuple[int, str], Any] = {}
    for cls in _walk_subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is not None:  # Cls[v] wrappers
            continue
        if not cls.__module__.startswith("kafka.protocol."):
            continue
        key = (cls.API_KEY, cls.type)
        assert key not in found, f"two kafka-python classes for {key}: {found[key]}, {cls}"
        found[key] = cls
    return found


KP_CLASSES = _kafka_python_classes()
APIS = {key: api for key, api in catalogue().items() if api.source == "kafka-python"}

CASE_KEYS = [
    (key, version, kind)
    for key, api in APIS.items()
    for version in range(api.versions.low, api.versions.high + 1)
    for kind in ("request", "response")
]


def _params(keys: list[tuple[int, int, str]]) -> list[Any]:
    return [pytest.param(key, version, kind, id=f"{APIS[key].name}-v{version}-{kind}")
            for key, version, kind in keys]


def _spec(api_key: int, kind: str) -> MessageSpec:
    api = APIS[api_key]
    return api.request if kind == "request" else api.response


CASES = _params(CASE_KEYS)
FLEXIBLE_CASES = _params([k for k in CASE_KEYS if _spec(k[0], k[2]).is_flexible(k[1])])


def _kp_class(api_key: int, kind: str) -> Any:
    return KP_CLASSES[(api_key, kind)]


def _is_bitfield(kf: Any) -> bool:
    return getattr(kf, "_type", None) is BitField


def _pairs(fields: tuple[FieldSpec, ...], kp_fields: tuple[Any, ...]) -> list[tuple[FieldSpec, Any]]:
    """kafkapy's FieldSpecs next to kafka-python's fields, which follow the same JSON order."""
    assert len(fields) == len(kp_fields), (
        [f.name for f in fields], [kf._name for kf in kp_fields])
    for fs, kf in zip(fields, kp_fields):
        # The only renames are kafka-python's json_patch of authorized-operations into bitfields.
        assert kf._name == fs.name or _is_bitfield(kf), (fs.name, kf._name)
    return list(zip(fields, kp_fields))


def _kp_struct_fields(kf: Any) -> tuple[Any, ...]:
    """The fields of a struct or struct-array field, as its data class encodes them."""
    return tuple(kf.array_of._fields if kf.is_struct_array() else kf._fields)


# --- spec defaults, read from the JSON independently of kafkapy's schema module -------------

def _in(field: FieldSpec, version: int) -> bool:
    return version in field.versions


def _tagged(field: FieldSpec, version: int, flexible: bool) -> bool:
    return flexible and field.tagged_in(version)


def spec_default(field: FieldSpec, version: int) -> Any:
    raw = field.default
    if raw == "null":
        return None
    if field.is_array:
        return []
    if field.fields is not None:
        return {f.snake: spec_default(f, version) for f in field.fields if _in(f, version)}
    kind = field.type
    if kind in INT_RANGES:
        return int(raw, 0) if isinstance(raw, str) and raw else int(raw or 0)
    if kind == "float64":
        return float(raw or 0.0)
    if kind == "bool":
        return raw is True or (isinstance(raw, str) and raw.lower() == "true")
    if kind == "string":
        return raw or ""
    if kind == "bytes":
        return b""
    if kind == "records":
        return None
    if kind == "uuid":
        return uuid.UUID(raw) if raw else ZERO_UUID
    raise AssertionError(f"no default for {kind}")


# --- hypothesis strategies from the FieldSpec tree ------------------------------------------

def _record_batches() -> list[bytes]:
    """A few valid magic-2 batches, built by kafka-python's producer-side builder."""
    out = []
    for n, (key, value, headers) in enumerate([
        (None, b"v", []),
        (b"key", b"value" * 8, [("h", b"x"), ("e", None)]),
        (b"", None, []),
    ]):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False,
            producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(n + 1):
            builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
        out.append(bytes(builder.build()))
    out.append(out[0] + out[1])  # a records field holding two batches
    return out


RECORD_BATCHES = _record_batches()


def _primitive_strategy(kind: str) -> st.SearchStrategy[Any]:
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        return st.integers(lo, hi)
    if kind == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "bool":
        return st.booleans()
    if kind == "string":
        # Mostly short; sometimes past 127 encoded bytes, where compact lengths take two bytes
        # (and a tagged field holding one needs a two-byte size).
        return st.text(max_size=12) | st.builds(
            operator.mul, st.characters(codec="utf-8"), st.integers(64, 200))
    if kind == "bytes":
        return st.binary(max_size=12) | st.binary(min_size=120, max_size=300)
    if kind == "records":
        # Opaque at the body level: real batches, and arbitrary bytes a broker must pass through.
        raw = st.sampled_from(RECORD_BATCHES) | st.binary(max_size=24)
        return raw | raw.map(Records)  # kafkapy encodes a decoded Records value as well as bytes
    if kind == "uuid":
        return st.just(ZERO_UUID) | st.uuids()
    raise AssertionError(f"no strategy for {kind}")


def field_strategy(field: FieldSpec, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if field.fields is not None:
        element = struct_strategy(field.fields, version, flexible)
    else:
        element = _primitive_strategy(field.element_type)
    strategy: st.SearchStrategy[Any]
    if field.is_array:
        strategy = st.lists(element, max_size=3)
        if field.fields is None:
            # Arrays of 127+ elements need a two-byte compact length.
            strategy |= st.lists(element, min_size=126, max_size=129)
    else:
        strategy = element
    if field.nullable_in(version):
        strategy = st.none() | strategy
    if _tagged(field, version, flexible):
        strategy = st.just(spec_default(field, version)) | strategy
    return strategy


def struct_strategy(fields: tuple[FieldSpec, ...], version: int, flexible: bool) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({
        f.snake: field_strategy(f, version, flexible) for f in fields if _in(f, version)})


_BODY_STRATEGIES: dict[tuple[int, str, int], st.SearchStrategy[Any]] = {}


def body_strategy(api_key: int, kind: str, version: int) -> st.SearchStrategy[Any]:
    key = (api_key, kind, version)
    if key not in _BODY_STRATEGIES:
        spec = _spec(api_key, kind)
        strategy = struct_strategy(spec.fields, version, spec.is_flexible(version))
        if api_key == API_VERSIONS_KEY and kind == "response" and version > 0:
            # kafka-python quirk: ApiVersionsResponse.decode reads *any* non-zero error_code as
            # the v0 fallback body, where brokers send v0 only for UNSUPPORTED_VERSION (and
            # kafkapy, like Java's client, falls back for that code only). Bodies at v1+ with
            # errors therefore cannot cross; test_api_versions_error_fallback covers the fallback.
            strategy = strategy.map(lambda body: {**body, "error_code": 0})
        _BODY_STRATEGIES[key] = strategy
    return _BODY_STRATEGIES[key]


headers = st.tuples(
    st.integers(*INT_RANGES["int32"]),  # correlation id
    st.none() | st.text(max_size=10) | st.just("c" * 200),  # client id
)


# --- canonical form ---------------------------------------------------------------------------

def _canon_unknown(value: Any) -> dict[int, bytes]:
    assert isinstance(value, Mapping) and value, f"bad {UNKNOWN_TAGS}: {value!r}"
    return {int(tag): bytes(data) for tag, data in value.items()}


def canon_struct(fields: tuple[FieldSpec, ...], version: int, flexible: bool, body: Any,
                 decoded: bool) -> dict[str, Any]:
    """A kafkapy body (generated, or ``decoded`` by kafkapy: then types are checked too)."""
    assert isinstance(body, Mapping), f"expected a struct, got {body!r}"
    present = {f.snake: f for f in fields if _in(f, version)}
    extra = set(body) - set(present) - ({UNKNOWN_TAGS} if flexible else set())
    assert not extra, f"keys outside the version: {sorted(extra)}"
    if decoded:
        missing = set(present) - set(body)
        assert not missing, f"decoded body lacks {sorted(missing)}"
    out = {key: canon_value(f, version, flexible, body[key], decoded) for key, f in present.items()}
    if UNKNOWN_TAGS in body:
        out[UNKNOWN_TAGS] = _canon_unknown(body[UNKNOWN_TAGS])
    return out


def canon_value(field: FieldSpec, version: int, flexible: bool, value: Any, decoded: bool) -> Any:
    if value is None:
        return None
    if field.is_array:
        assert isinstance(value, list), f"{field.snake}: expected a list, got {value!r}"
        return [canon_element(field, version, flexible, item, decoded) for item in value]
    return canon_element(field, version, flexible, value, decoded)


def canon_element(field: FieldSpec, version: int, flexible: bool, value: Any, decoded: bool) -> Any:
    if field.fields is not None:
        return canon_struct(field.fields, version, flexible, value, decoded)
    kind = field.element_type
    if kind == "records":
        if decoded:
            assert isinstance(value, Records), f"{field.snake}: records decode to Records, got {type(value)}"
        return bytes(value)
    if decoded:
        expected = {"bytes": bytes, "string": str, "uuid": uuid.UUID, "bool": bool,
                    "float64": float}.get(kind, int)
        assert type(value) is expected, f"{field.snake}: {type(value).__name__} for {kind}"
    return value


def canon_kafka_python(fields: tuple[FieldSpec, ...], kp_fields: tuple[Any, ...], version: int,
                       flexible: bool, obj: Any) -> dict[str, Any]:
    """A kafka-python DataContainer in the canonical form of kafkapy bodies."""
    out: dict[str, Any] = {}
    for fs, kf in _pairs(fields, kp_fields):
        if not _in(fs, version):
            continue
        value = getattr(obj, kf.name)
        if _tagged(fs, version, flexible) and kf.name not in (obj.tags or ()):
            # Absent from the wire: kafka-python reports its own default, the spec default.
            assert value == kf.default, (fs.snake, value, kf.default)
            out[fs.snake] = canon_value(fs, version, flexible, spec_default(fs, version), False)
            continue
        out[fs.snake] = _canon_kp_value(fs, kf, version, flexible, value)
    if obj.unknown_tags:
        out[UNKNOWN_TAGS] = {int(name.lstrip("_")): bytes(data) for name, data in obj.unknown_tags.items()}
    return out


def _canon_kp_value(fs: FieldSpec, kf: Any, version: int, flexible: bool, value: Any) -> Any:
    if fs.is_array:
        if value is None:
            return None
        return [_canon_kp_element(fs, kf, version, flexible, item) for item in value]
    return _canon_kp_element(fs, kf, version, flexible, value)


def _canon_kp_element(fs: FieldSpec, kf: Any, version: int, flexible: bool, value: Any) -> Any:
    if fs.fields is not None:
        if value is None:
            return None
        return canon_kafka_python(fs.fields, _kp_struct_fields(kf), version, flexible, value)
    if _is_bitfield(kf):
        if value is None:
            return INT32_MIN
        bits = BitField.to_32_bit_field(value)
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    if fs.element_type == "uuid":
        return ZERO_UUID if value is None else value
    if fs.element_type in ("bytes", "records") and value is not None:
        return bytes(value)
    return value


# --- kafkapy body -> kafka-python object -------------------------------------------------------

def to_kafka_python(fields: tuple[FieldSpec, ...], kp_fields: tuple[Any, ...], version: int,
                    flexible: bool, body: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor keywords for the kafka-python data class of one struct."""
    kwargs = {}
    for fs, kf in _pairs(fields, kp_fields):
        if not _in(fs, version):
            continue
        value = body[fs.snake]
        if _tagged(fs, version, flexible) and canon_value(fs, version, flexible, value, False) == \
                canon_value(fs, version, flexible, spec_default(fs, version), False):
            continue  # unset is "absent"; see the module docstring on tagged struct defaults
        kwargs[kf.name] = _kp_value(fs, kf, version, flexible, value)
    for tag, data in (body.get(UNKNOWN_TAGS) or {}).items():
        kwargs[f"_{tag}"] = data
    return kwargs


def _kp_value(fs: FieldSpec, kf: Any, version: int, flexible: bool, value: Any) -> Any:
    if fs.is_array:
        if value is None:
            return None
        return [_kp_element(fs, kf, version, flexible, item) for item in value]
    return _kp_element(fs, kf, version, flexible, value)


def _kp_element(fs: FieldSpec, kf: Any, version: int, flexible: bool, value: Any) -> Any:
    if fs.fields is not None:
        if value is None:
            return None
        return kf.data_class(**to_kafka_python(fs.fields, _kp_struct_fields(kf), version, flexible, value))
    if _is_bitfield(kf):
        if value == INT32_MIN:
            return None
        return BitField.from_32_bit_field(value & 0xFFFFFFFF)
    if fs.element_type == "uuid":
        return None if value == ZERO_UUID else value
    if fs.element_type == "records" and value is not None:
        return bytes(value)
    return value


def kafka_python_message(api_key: int, kind: str, version: int, body: Mapping[str, Any]) -> Any:
    spec, cls = _spec(api_key, kind), _kp_class(api_key, kind)
    kwargs = to_kafka_python(spec.fields, tuple(cls._struct._fields), version,
                             spec.is_flexible(version), body)
    return cls[version](**kwargs)


def kafka_python_canon(api_key: int, kind: str, version: int, obj: Any) -> dict[str, Any]:
    spec, cls = _spec(api_key, kind), _kp_class(api_key, kind)
    assert obj.version == version
    return canon_kafka_python(spec.fields, tuple(cls._struct._fields), version,
                              spec.is_flexible(version), obj)


def kafkapy_canon(api_key: int, kind: str, version: int, body: Mapping[str, Any],
                  decoded: bool) -> dict[str, Any]:
    spec = _spec(api_key, kind)
    return canon_struct(spec.fields, version, spec.is_flexible(version), body, decoded)


# --- the two directions -------------------------------------------------------------------------

def kafka_python_encode(api_key: int, kind: str, version: int, body: Mapping[str, Any],
                        correlation_id: int, client_id: str | None) -> bytes:
    obj = kafka_python_message(api_key, kind, version, body)
    if kind == "request":
        obj.with_header(correlation_id=correlation_id, client_id=client_id)
    else:
        obj.with_header(correlation_id=correlation_id)
    # No version= here: kafka-python's encode(version=...) sets header.request_api_version,
    # which a ResponseHeader lacks (AttributeError); Cls[version] already fixed the version.
    return bytes(obj.encode(header=True))


def kafkapy_decode_and_check(api_key: int, kind: str, version: int, data: bytes,
                             correlation_id: int, client_id: str | None) -> dict[str, Any]:
    """Decode with kafkapy, check the header, return the body."""
    flexible = _spec(api_key, kind).is_flexible(version)
    if kind == "request":
        req = decode_request(data)
        assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == \
            (api_key, version, correlation_id, client_id)
        assert req.header_version == (2 if flexible else 1)
        assert req.trailing_bytes == 0
        return req.body
    resp = decode_response(data, api_key, version)
    assert (resp.api_key, resp.api_version, resp.correlation_id) == (api_key, version, correlation_id)
    assert resp.trailing_bytes == 0
    return resp.body


def kafkapy_encode(api_key: int, kind: str, version: int, body: Mapping[str, Any],
                   correlation_id: int, client_id: str | None) -> bytes:
    if kind == "request":
        return encode_request(api_key, version, correlation_id, client_id, body)
    return encode_response(api_key, version, correlation_id, body)


def kafka_python_decode_and_check(api_key: int, kind: str, version: int, data: bytes,
                                  correlation_id: int, client_id: str | None) -> Any:
    obj = _kp_class(api_key, kind).decode(data, version=version, header=True)
    header = obj.header
    assert header.correlation_id == correlation_id
    if kind == "request":
        assert (header.request_api_key, header.request_api_version, header.client_id) == \
            (api_key, version, client_id)
    return obj


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
@INTEROP_SETTINGS
@given(data=st.data())
def test_kafka_python_encodes_kafkapy_decodes(api_key: int, version: int, kind: str, data: Any) -> None:
    """Direction A: kafka-python's bytes decode to the generated values and re-encode identically."""
    body = data.draw(body_strategy(api_key, kind, version), label="body")
    correlation_id, client_id = data.draw(headers, label="header")
    wire = kafka_python_encode(api_key, kind, version, body, correlation_id, client_id)
    decoded = kafkapy_decode_and_check(api_key, kind, version, wire, correlation_id, client_id)
    assert kafkapy_canon(api_key, kind, version, decoded, decoded=True) == \
        kafkapy_canon(api_key, kind, version, body, decoded=False)
    assert kafkapy_encode(api_key, kind, version, decoded, correlation_id, client_id) == wire


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
@INTEROP_SETTINGS
@given(data=st.data())
def test_kafkapy_encodes_kafka_python_decodes(api_key: int, version: int, kind: str, data: Any) -> None:
    """Direction B: kafkapy's bytes decode in kafka-python to the generated values and
    re-encode identically."""
    body = data.draw(body_strategy(api_key, kind, version), label="body")
    correlation_id, client_id = data.draw(headers, label="header")
    wire = kafkapy_encode(api_key, kind, version, body, correlation_id, client_id)
    obj = kafka_python_decode_and_check(api_key, kind, version, wire, correlation_id, client_id)
    assert kafka_python_canon(api_key, kind, version, obj) == \
        kafkapy_canon(api_key, kind, version, body, decoded=False)
    assert bytes(obj.encode(header=True)) == wire


# --- omitted fields ---------------------------------------------------------------------------

def sparsify(fields: tuple[FieldSpec, ...], version: int, flexible: bool, body: Mapping[str, Any],
             data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Drop some fields, at every depth: (the sparse body, the body with spec defaults in their place)."""
    sparse: dict[str, Any] = {}
    filled: dict[str, Any] = {}
    for f in fields:
        if not _in(f, version):
            continue
        value = body[f.snake]
        if data.draw(st.booleans(), label=f"drop {f.snake}"):
            filled[f.snake] = spec_default(f, version)
        elif f.fields is not None and value is not None and not _tagged(f, version, flexible):
            # Structs inside tagged fields stay whole: a partial one that equals the default once
            # filled is written anyway (kafkapy bug, test_partial_tagged_struct_equal_to_default).
            if f.is_array:
                both = [sparsify(f.fields, version, flexible, item, data) for item in value]
                sparse[f.snake], filled[f.snake] = [b[0] for b in both], [b[1] for b in both]
            else:
                sparse[f.snake], filled[f.snake] = sparsify(f.fields, version, flexible, value, data)
        else:
            sparse[f.snake] = filled[f.snake] = value
    return sparse, filled


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
@INTEROP_SETTINGS
@given(data=st.data())
def test_omitted_fields_take_spec_defaults(api_key: int, version: int, kind: str, data: Any) -> None:
    """kafkapy fills omitted fields with the spec's defaults: its bytes for a sparse body are
    kafka-python's for the body with every default written out."""
    spec = _spec(api_key, kind)
    body = data.draw(body_strategy(api_key, kind, version), label="body")
    sparse, filled = sparsify(spec.fields, version, spec.is_flexible(version), body, data)
    correlation_id, client_id = data.draw(headers, label="header")
    wire = kafka_python_encode(api_key, kind, version, filled, correlation_id, client_id)
    assert kafkapy_encode(api_key, kind, version, sparse, correlation_id, client_id) == wire


def _fields_of(fields: tuple[FieldSpec, ...], name: str) -> tuple[FieldSpec, ...]:
    field = next(f for f in fields if f.snake == name)
    assert field.fields is not None
    return field.fields


def _defaults(fields: tuple[FieldSpec, ...], version: int, **values: Any) -> dict[str, Any]:
    body = {f.snake: spec_default(f, version) for f in fields if _in(f, version)}
    assert values.keys() <= body.keys()
    return {**body, **values}


def test_partial_tagged_struct_equal_to_default() -> None:
    """ProduceResponse v12's tagged current_leader given as {leader_id: -1}: leader_epoch takes
    its default -1, so the struct is the default and, like kafka-python and Java, the tag must
    be omitted (kafkapy once wrote it, comparing before filling defaults)."""
    spec = _spec(0, "response")
    responses = _fields_of(spec.fields, "responses")
    partitions = _fields_of(responses, "partition_responses")

    def body(leader: dict[str, int]) -> dict[str, Any]:
        partition = _defaults(partitions, 12, current_leader=leader)
        return _defaults(spec.fields, 12, responses=[
            _defaults(responses, 12, name="t", partition_responses=[partition])])

    full = body({"leader_id": -1, "leader_epoch": -1})
    wire = kafka_python_encode(0, "response", 12, full, 1, None)
    assert encode_response(0, 12, 1, full) == wire
    assert encode_response(0, 12, 1, body({"leader_id": -1})) == wire


def test_tagged_uuid_none_is_the_default() -> None:
    """FetchRequest v17's tagged replica_directory_id: kafka-python represents the zero UUID as
    None and omits the tag; kafkapy takes None as the zero UUID and must omit it too."""
    spec = _spec(1, "request")
    topics = _fields_of(spec.fields, "topics")
    partitions = _fields_of(topics, "partitions")

    def body(directory: uuid.UUID | None) -> dict[str, Any]:
        partition = _defaults(partitions, 17, replica_directory_id=directory)
        return _defaults(spec.fields, 17, topics=[
            _defaults(topics, 17, topic_id=uuid.UUID(int=5), partitions=[partition])])

    wire = kafka_python_encode(1, "request", 17, body(ZERO_UUID), 1, "c")
    assert encode_request(1, 17, 1, "c", body(ZERO_UUID)) == wire
    assert encode_request(1, 17, 1, "c", body(None)) == wire


# --- unknown tagged fields ----------------------------------------------------------------------

def inject_unknown_tags(fields: tuple[FieldSpec, ...], version: int, body: Mapping[str, Any],
                        tags: Mapping[int, bytes]) -> dict[str, Any]:
    """A copy of a (flexible) body with ``tags`` as unknown tagged fields of every struct in it,
    except structs carried inside tagged fields: kafka-python decodes those with an implicitly
    empty tag section (it skips one byte), so unknown tags there cannot cross to it."""
    out = dict(body)
    out[UNKNOWN_TAGS] = dict(tags)
    for f in fields:
        if not _in(f, version) or f.fields is None or f.tagged_in(version):
            continue
        value = body[f.snake]
        if value is None:
            continue
        if f.is_array:
            out[f.snake] = [inject_unknown_tags(f.fields, version, item, tags) for item in value]
        else:
            out[f.snake] = inject_unknown_tags(f.fields, version, value, tags)
    return out


def strip_unknown_tags(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: strip_unknown_tags(v) for k, v in value.items() if k != UNKNOWN_TAGS}
    if isinstance(value, list):
        return [strip_unknown_tags(v) for v in value]
    return value


@pytest.mark.parametrize(("api_key", "version", "kind"), FLEXIBLE_CASES)
@INTEROP_SETTINGS
@given(data=st.data())
def test_unknown_tagged_fields(api_key: int, version: int, kind: str, data: Any) -> None:
    """kafkapy keeps unknown tags byte for byte; kafka-python still reads the known values.

    kafka-python keeps unknown tags on decode (``unknown_tags``) but drops them when
    encoding, so its re-encode must equal kafkapy's encoding of the body without them.
    """
    spec = _spec(api_key, kind)
    plain = data.draw(body_strategy(api_key, kind, version), label="body")
    tags = data.draw(st.sampled_from([
        {99: b"xyz"},
        {99: b"xyz", 300: b"", 20000: bytes(range(256)) * 2},  # multi-byte tag numbers and sizes
    ]), label="tags")
    body = inject_unknown_tags(spec.fields, version, plain, tags)
    correlation_id, client_id = data.draw(headers, label="header")

    wire = kafkapy_encode(api_key, kind, version, body, correlation_id, client_id)
    decoded = kafkapy_decode_and_check(api_key, kind, version, wire, correlation_id, client_id)
    expected = kafkapy_canon(api_key, kind, version, body, decoded=False)
    assert kafkapy_canon(api_key, kind, version, decoded, decoded=True) == expected
    assert kafkapy_encode(api_key, kind, version, decoded, correlation_id, client_id) == wire
    assert len(wire) > len(kafkapy_encode(api_key, kind, version, plain, correlation_id, client_id))

    obj = kafka_python_decode_and_check(api_key, kind, version, wire, correlation_id, client_id)
    assert kafka_python_canon(api_key, kind, version, obj) == expected
    assert bytes(obj.encode(header=True)) == \
        kafkapy_encode(api_key, kind, version, strip_unknown_tags(body), correlation_id, client_id)


# --- targeted cases -------------------------------------------------------------------------------

def test_every_kafka_python_api_has_kafka_python_classes() -> None:
    assert len(APIS) >= 50
    for key, api in APIS.items():
        for kind in ("request", "response"):
            cls = _kp_class(key, kind)
            spec = _spec(key, kind)
            assert cls.max_version == api.versions.high, (api.name, kind)
            _check_alignment(spec.fields, tuple(cls._struct._fields))


def _check_alignment(fields: tuple[FieldSpec, ...], kp_fields: tuple[Any, ...]) -> None:
    for fs, kf in _pairs(fields, kp_fields):
        assert (fs.fields is None) == (not (kf.is_struct() or kf.is_struct_array())), fs.name
        assert fs.is_array == kf.is_array(), fs.name
        if fs.fields is not None:
            _check_alignment(fs.fields, _kp_struct_fields(kf))


@pytest.mark.parametrize("version", range(1, 5))
def test_api_versions_error_fallback(version: int) -> None:
    """A broker that cannot parse ApiVersions vN answers UNSUPPORTED_VERSION with a v0 body;
    both libraries read it as v0 whatever version was asked for."""
    body = {"error_code": UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    wire = bytes(kafka_python_message(API_VERSIONS_KEY, "response", 0, body).encode(version=0))
    wire = (7).to_bytes(4, "big") + wire  # response header v0: the correlation id
    assert encode_response(API_VERSIONS_KEY, 0, 7, body) == wire
    resp = decode_response(wire, API_VERSIONS_KEY, version)
    assert (resp.api_version, resp.correlation_id, resp.trailing_bytes) == (0, 7, 0)
    assert kafkapy_canon(API_VERSIONS_KEY, "response", 0, resp.body, decoded=True) == \
        kafkapy_canon(API_VERSIONS_KEY, "response", 0, body, decoded=False)
    obj = _kp_class(API_VERSIONS_KEY, "response").decode(wire, version=version, header=True)
    assert obj.version == 0
    assert kafka_python_canon(API_VERSIONS_KEY, "response", 0, obj) == \
        kafkapy_canon(API_VERSIONS_KEY, "response", 0, body, decoded=False)


def test_record_batches_cross_intact() -> None:
    """A Produce request carrying kafka-python-built batches: kafkapy hands back the same bytes
    as a Records value that iterates to the batches."""
    batch = RECORD_BATCHES[1]
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
    wire = kafka_python_encode(0, "request", 8, body, 1, "c")
    decoded = kafkapy_decode_and_check(0, "request", 8, wire, 1, "c")
    records = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, Records) and records == batch
    assert len(list(records)) == 1
