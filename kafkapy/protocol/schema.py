"""Message specs at one version become construct objects with a generated fast path.

Theory of operation
-------------------
A (spec, version) pair is turned into a tree of codecs: a StructCodec per
struct, holding the Primitive (or nested StructCodec) of every field present
in that version, plus the tagged fields of flexible versions. The tree can run
two ways that must agree:

* interpreted: ``StructCodec.read``/``write`` walk the tree (construct's
  "core" path, used by ``MessageSchema.parse`` before compilation);
* compiled: every StructCodec emits one Python function for decoding and one
  for encoding, into construct's CodeGen through ``_emitparse``/``_emitbuild``,
  and ``MessageSchema.compile()`` (construct's compiler) execs them. Runs of
  fixed-width fields collapse into a single precompiled ``struct.Struct``.

Kafka messages are self-describing (each length precedes its data), so the
generated functions need no construct context: they take ``(buf, pos, end)``
and return ``(value, pos)``. That is what makes them several times faster than
construct's general Struct, whose compiled form rebuilds a context per struct.

Decoded values are ``Body`` dicts keyed by kafka-python's snake_case names.
Tagged fields absent from the wire get their defaults; unknown tags are kept
under ``"_unknown_tags"`` as ``{tag: bytes}`` and written back, so a decoded
body re-encodes byte for byte.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import construct

from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol.primitives import (
    FIXED,
    RUNTIME,
    Array,
    Binary,
    Buffer,
    Fixed,
    Gen,
    Primitive,
    RecordsField,
    Text,
    UnsignedVarint,
    read_uvarint,
    uvarint_bytes,
)
from kafkapy.protocol.specs import FieldSpec, MessageSpec

__all__ = ["UNKNOWN_TAGS", "Body", "MessageSchema", "StructCodec"]

UNKNOWN_TAGS = "_unknown_tags"


class Body(dict):  # type: ignore[type-arg]
    """A decoded struct: a plain dict that also allows ``body.field`` access."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def default_value(field: FieldSpec, version: int) -> Any:
    """The value a field takes when absent, by Kafka's rules for spec defaults."""
    raw = field.default
    nullable = field.nullable_in(version)
    if isinstance(raw, str) and raw == "null":
        if not nullable:
            raise ValueError(f"field {field.name}: default null but not nullable in v{version}")
        return None
    if field.is_array:
        return []
    if field.is_struct:
        return None  # filled by the struct codec, which knows the nested fields
    kind = field.type
    if kind in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        if raw in (None, ""):
            return 0
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if kind == "float64":
        return float(raw) if raw not in (None, "") else 0.0
    if kind == "bool":
        return raw is True or (isinstance(raw, str) and raw.lower() == "true")
    if kind == "string":
        return "" if raw is None else str(raw)
    if kind == "bytes":
        return b""
    if kind == "records":
        return None
    if kind == "uuid":
        return uuid.UUID(int=0) if raw in (None, "") else uuid.UUID(str(raw))
    raise ValueError(f"field {field.name}: no default for type {kind}")


class NullableStruct(Primitive):
    """A struct that may be null: Kafka writes an int8 marker, -1 for null and 1 for present."""

    def __init__(self, inner: StructCodec) -> None:
        self.inner = inner
        self.name = f"nullable {inner.name}"

    def read(self, buf: Buffer, pos: int, end: int, field: str) -> tuple[Any, int]:
        marker, pos = FIXED["int8"].read(buf, pos, end, field)
        if marker < 0:
            return None, pos
        return self.inner.read(buf, pos, end, field)

    def write(self, value: Any, out: bytearray, field: str) -> None:
        if value is None:
            out += b"\xff"
        else:
            out += b"\x01"
            self.inner.write(value, out, field)

    def emit_read(self, g: Gen, target: str, ind: int, field: str, end: str = "end") -> None:
        g.emit(ind, f"if pos + 1 > {end}: raise _short(pos, 1, {end}, {field!r})")
        g.emit(ind, f"if buf[pos] >= 128: pos += 1; {target} = None")
        g.emit(ind, "else:")
        g.emit(ind + 1, "pos += 1")
        self.inner.emit_read(g, target, ind + 1, field, end)

    def emit_write(self, g: Gen, expr: str, ind: int, field: str) -> None:
        v = g.var("s")
        g.emit(ind, f"{v} = {expr}")
        g.emit(ind, f"if {v} is None: out += b'\\xff'")
        g.emit(ind, "else:")
        g.emit(ind + 1, "out += b'\\x01'")
        self.inner.emit_write(g, v, ind + 1, field)


class _Slot:
    """One field of a StructCodec at one version."""

    __slots__ = ("codec", "default", "field", "key", "path")

    def __init__(self, field: FieldSpec, codec: Primitive, default: Any, path: str) -> None:
        self.field = field
        self.key = field.snake
        self.codec = codec
        self.default = default
        self.path = path


class StructCodec(Primitive):
    """A struct (or whole message body) at one version."""

    def __init__(self, name: str, fields: tuple[FieldSpec, ...], version: int, flexible: bool,
                 path: str = "") -> None:
        self.name = name
        self.version = version
        self.flexible = flexible
        self.all_fields = fields
        self.slots: list[_Slot] = []
        self.tagged: list[_Slot] = []
        for field in fields:
            if version not in field.versions:
                continue
            sub_path = f"{path}.{field.snake}" if path else field.snake
            codec = self._codec_for(field, sub_path)
            default = default_value(field, version)
            if field.is_struct and default is None and not field.nullable_in(version):
                assert isinstance(codec, StructCodec)
                default = codec.default_body()
            slot = _Slot(field, codec, default, sub_path)
            if flexible and field.tagged_in(version):
                self.tagged.append(slot)
            else:
                self.slots.append(slot)
        self.tagged.sort(key=lambda s: s.field.tag or 0)
        self.keys = frozenset(s.key for s in self.slots + self.tagged) | (
            {UNKNOWN_TAGS} if flexible else frozenset())
        self._other_fields = {f.snake: f for f in fields if version not in f.versions}
        self.fn_decode: str | None = None
        self.fn_encode: str | None = None

    def _compact(self, field: FieldSpec) -> bool:
        if not self.flexible:
            return False
        return field.flexible_versions is None or self.version in field.flexible_versions

    def _codec_for(self, field: FieldSpec, path: str) -> Primitive:
        compact = self._compact(field)
        nullable = field.nullable_in(self.version)
        element = self._element_codec(field, field.element_type, compact, path)
        if field.is_array:
            return Array(element, compact, nullable, field.length_type)
        if field.is_struct and nullable:
            assert isinstance(element, StructCodec)
            return NullableStruct(element)
        if isinstance(element, (Text, Binary)) and nullable:
            return type(element)(compact, True)
        return element

    def _element_codec(self, field: FieldSpec, type_: str, compact: bool, path: str) -> Primitive:
        if field.fields is not None:
            return StructCodec(type_, field.fields, self.version, self.flexible, path)
        if type_ in FIXED:
            return FIXED[type_]
        if type_ == "string":
            return Text(compact, False)
        if type_ == "bytes":
            return Binary(compact, False)
        if type_ == "records":
            return RecordsField(compact, False)
        raise ValueError(f"field {field.name}: unsupported type {type_}")

    def default_body(self) -> Body:
        body = Body()
        for slot in self.slots + self.tagged:
            body[slot.key] = _fresh(slot.default)
        return body

    # --- interpreted path ------------------------------------------------------------------

    def read(self, buf: Buffer, pos: int, end: int, field: str = "") -> tuple[Any, int]:
        body = Body()
        for slot in self.slots:
            if slot.field.present_if_remaining and pos >= end:
                body[slot.key] = None
                continue
            body[slot.key], pos = slot.codec.read(buf, pos, end, slot.path)
        if self.flexible:
            pos = self._read_tags(body, buf, pos, end)
        return body, pos

    def _read_tags(self, body: Body, buf: Buffer, pos: int, end: int) -> int:
        by_tag = {slot.field.tag: slot for slot in self.tagged}
        for slot in self.tagged:
            body[slot.key] = _fresh(slot.default)
        where = f"{self.name} tagged fields"
        count, pos = read_uvarint(buf, pos, end, where)
        unknown: dict[int, bytes] = {}
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end, where)
            size, pos = read_uvarint(buf, pos, end, where)
            if pos + size > end:
                raise DecodeError(f"needed {size} bytes for {where} but only {end - pos} remain",
                                  offset=pos, field=where, truncated=True)
            stop = pos + size
            tagged = by_tag.get(tag)
            if tagged is None:
                unknown[tag] = bytes(buf[pos:stop])
            else:
                body[tagged.key], _ = tagged.codec.read(buf, pos, stop, tagged.path)
            pos = stop
        if unknown:
            body[UNKNOWN_TAGS] = unknown
        return pos

    def write(self, value: Any, out: bytearray, field: str = "") -> None:
        if not isinstance(value, Mapping):
            raise EncodeError(f"expected a mapping for {self.name}, got {type(value).__name__}",
                              field=field or None)
        self.check_keys(value)
        for slot in self.slots:
            item = value.get(slot.key, slot.default)
            if slot.field.present_if_remaining and item is None:
                continue
            slot.codec.write(item, out, slot.path)
        if self.flexible:
            self._write_tags(value, out)

    def _write_tags(self, value: Mapping[str, Any], out: bytearray) -> None:
        chunks: dict[int, bytes] = {}
        for slot in self.tagged:
            item = value.get(slot.key, slot.default)
            if not slot_holds_default(slot, item):
                buf = bytearray()
                slot.codec.write(item, buf, slot.path)
                chunks[slot.field.tag or 0] = bytes(buf)
        write_tag_section(out, chunks, value.get(UNKNOWN_TAGS))

    def holds_defaults(self, value: Mapping[str, Any]) -> bool:
        """Every field at its default (missing ones count as default), unknown tags absent."""
        if value.get(UNKNOWN_TAGS):
            return False
        for slot in self.slots + self.tagged:
            if slot.key in value and not slot_holds_default(slot, value[slot.key]):
                return False
        return True

    def fit(self, value: Mapping[str, Any]) -> Body:
        """A copy holding only the fields of this version, nested structs included, so one
        body written for the newest version can be encoded at any older one."""
        body = Body()
        for slot in self.slots + self.tagged:
            if slot.key in value:
                body[slot.key] = _fit_value(slot.codec, value[slot.key])
        if self.flexible and UNKNOWN_TAGS in value:
            body[UNKNOWN_TAGS] = value[UNKNOWN_TAGS]
        return body

    def check_keys(self, value: Mapping[str, Any]) -> None:
        """Refuse fields this version lacks, unless they hold their default, and unknown names."""
        for key in value.keys() - self.keys:
            other = self._other_fields.get(key)
            if other is None:
                raise EncodeError(f"{self.name} has no field {key!r}", field=key)
            item = value[key]
            try:
                absent = item == default_value(other, self.version)
            except ValueError:
                absent = item is None
            if not absent and not (other.is_array and not item) and item is not None:
                raise EncodeError(
                    f"{self.name} v{self.version} has no field {key!r}; it exists only in versions "
                    f"{other.versions}", field=key)

    # --- compiled path ---------------------------------------------------------------------

    def emit_read(self, g: Gen, target: str, ind: int, field: str, end: str = "end") -> None:
        g.emit(ind, f"{target}, pos = {self.emit_functions(g)[0]}(buf, pos, {end})")

    def emit_write(self, g: Gen, expr: str, ind: int, field: str) -> None:
        g.emit(ind, f"{self.emit_functions(g)[1]}({expr}, out)")

    def emit_functions(self, g: Gen) -> tuple[str, str]:
        """Emit this struct's decode and encode functions once per Gen; return their names."""
        cache: dict[int, tuple[str, str]] = g.__dict__.setdefault("struct_fns", {})
        if id(self) in cache:
            return cache[id(self)]
        dec, enc = g.var("decode_" + self.name), g.var("encode_" + self.name)
        cache[id(self)] = (dec, enc)
        # Nested structs first, into their own Gen-level functions.
        for slot in self.slots + self.tagged:
            for codec in _nested_structs(slot.codec):
                codec.emit_functions(g)
        self._emit_decoder(g, dec)
        self._emit_encoder(g, enc)
        return dec, enc

    def emit_fit(self, g: Gen) -> str:
        """Emit this struct's ``fit`` (see :meth:`fit`) once per Gen; return its name. The common
        case, a body with no field the version lacks, is one C-level dict copy, then the nested
        structs are fitted in turn; any other body is copied field by field."""
        cache: dict[int, str] = g.__dict__.setdefault("struct_fits", {})
        if id(self) in cache:
            return cache[id(self)]
        name = g.var("fit_" + self.name)
        cache[id(self)] = name
        nested = []  # (key, fit function of the struct, whether it is an array of them)
        for slot in self.slots + self.tagged:
            codec = slot.codec
            if isinstance(codec, Array):
                codec = codec.element
                many = True
            else:
                many = False
            if isinstance(codec, NullableStruct):
                codec = codec.inner
            if isinstance(codec, StructCodec):
                nested.append((slot.key, codec.emit_fit(g), many))
        allowed = g.var("K")
        g.lines.insert(0, f"{allowed} = frozenset({sorted(self.keys)!r})")
        g.emit(0, f"def {name}(obj):")
        g.emit(1, f"if {allowed}.issuperset(obj):")
        g.emit(2, "r = _Body(obj)")
        g.emit(1, "else:")
        g.emit(2, "r = _Body()")
        for key in sorted(self.keys):
            g.emit(2, f"if {key!r} in obj: r[{key!r}] = obj[{key!r}]")
        for key, fn, many in nested:
            g.emit(1, f"v = r.get({key!r})")
            g.emit(1, "if v is not None:")
            if many:
                g.emit(2, f"r[{key!r}] = [None if x is None else {fn}(x) for x in v]")
            else:
                g.emit(2, f"r[{key!r}] = {fn}(v)")
        g.emit(1, "return r")
        g.emit(0, "")
        return name

    def _runs(self) -> list[list[_Slot]]:
        """Group consecutive fixed-width fields so each run is one struct.unpack_from."""
        runs: list[list[_Slot]] = []
        for slot in self.slots:
            fixed_width = isinstance(slot.codec, Fixed) and not slot.field.present_if_remaining
            if fixed_width and runs and runs[-1] and isinstance(runs[-1][0].codec, Fixed) and not \
                    runs[-1][0].field.present_if_remaining:
                runs[-1].append(slot)
            else:
                runs.append([slot])
        return runs

    def _emit_decoder(self, g: Gen, name: str) -> None:
        g.emit(0, f"def {name}(buf, pos, end):")
        g.emit(1, "r = _Body()")
        for run in self._runs():
            first = run[0]
            if isinstance(first.codec, Fixed) and not first.field.present_if_remaining:
                fmt = ">" + "".join(s.codec.fmt or "" for s in run)
                size = struct.calcsize(fmt)
                st = g.var("S")
                g.lines.insert(0, f"{st} = _struct.Struct({fmt!r})")
                g.emit(1, f"if pos + {size} > end: raise _short_run(pos, end, {fixed_run_sizes(run)!r})")
                targets = ", ".join(f"r[{s.key!r}]" for s in run)
                g.emit(1, f"{targets}{',' if len(run) == 1 else ''} = {st}.unpack_from(buf, pos)")
                g.emit(1, f"pos += {size}")
                for s in run:
                    if s.codec.name == "uuid":
                        g.emit(1, f"r[{s.key!r}] = _UUID(bytes=r[{s.key!r}])")
                continue
            if first.field.present_if_remaining:
                g.emit(1, "if pos >= end:")
                g.emit(2, f"r[{first.key!r}] = None")
                g.emit(1, "else:")
                first.codec.emit_read(g, f"r[{first.key!r}]", 2, first.path)
                continue
            first.codec.emit_read(g, f"r[{first.key!r}]", 1, first.path)
        if self.flexible:
            self._emit_tag_decoder(g)
        g.emit(1, "return r, pos")
        g.emit(0, "")

    def _emit_tag_decoder(self, g: Gen) -> None:
        for slot in self.tagged:
            _emit_fresh(g, 1, f"r[{slot.key!r}]", slot.default)
        emit_tag_section(
            g, self, lambda slot: slot.codec.emit_read(g, f"r[{slot.key!r}]", 4, slot.path, end="stop"),
            "unknown = r[" + repr(UNKNOWN_TAGS) + "] = {}",
        )

    def _emit_encoder(self, g: Gen, name: str) -> None:
        allowed = g.var("K")
        g.lines.insert(0, f"{allowed} = frozenset({sorted(self.keys)!r})")
        g.emit(0, f"def {name}(obj, out):")
        g.emit(1, f"if not {allowed}.issuperset(obj): _check_keys[{id(self)}](obj)")
        g.emit(1, "get = obj.get")
        for run in self._runs():
            first = run[0]
            if isinstance(first.codec, Fixed) and not first.field.present_if_remaining:
                fmt = ">" + "".join(s.codec.fmt or "" for s in run)
                st = g.var("S")
                g.lines.insert(0, f"{st} = _struct.Struct({fmt!r})")
                args = ", ".join(
                    _fixed(s).wire_expr(f"get({s.key!r}, {_literal(s.default)})") for s in run)
                g.emit(1, f"out += {st}.pack({args})")
                continue
            expr = f"get({first.key!r}, {_template(g, first.default)})"
            if first.field.present_if_remaining:
                v = g.var("s")
                g.emit(1, f"{v} = {expr}")
                g.emit(1, f"if {v} is not None:")
                first.codec.emit_write(g, v, 2, first.path)
                continue
            first.codec.emit_write(g, expr, 1, first.path)
        if self.flexible:
            self._emit_tag_encoder(g)
        g.emit(0, "")

    def _emit_tag_encoder(self, g: Gen) -> None:
        if not self.tagged:
            g.emit(1, f"unknown = get({UNKNOWN_TAGS!r})")
            g.emit(1, "if unknown: _write_tags(out, {}, unknown)")
            g.emit(1, "else: out += b'\\x00'")
            return
        g.emit(1, "chunks = {}")
        g.emit(1, "saved = out")
        for slot in self.tagged:
            v = g.var("t")
            template = _template(g, slot.default)
            g.emit(1, f"{v} = get({slot.key!r}, {template})")
            if isinstance(slot.codec, StructCodec):
                # A full struct equal to the default is the common case and a C-speed dict compare;
                # only a partly-filled mapping needs the field-by-field check.
                g.emit(1, f"if {v} != {template} and not _holds_default[{id(slot)}]({v}):")
            elif slot.codec.name == "uuid":
                g.emit(1, f"if {v} is not None and {v} != {template}:")  # None is the zero UUID
            else:
                g.emit(1, f"if {v} != {template}:")
            g.emit(2, "out = bytearray()")
            slot.codec.emit_write(g, v, 2, slot.path)
            g.emit(2, f"chunks[{slot.field.tag}] = bytes(out)")
        g.emit(1, "out = saved")
        g.emit(1, f"unknown = get({UNKNOWN_TAGS!r})")
        g.emit(1, "if chunks or unknown: _write_tags(out, chunks, unknown)")
        g.emit(1, "else: out += b'\\x00'")


def slot_holds_default(slot: _Slot, value: Any) -> bool:
    """Whether a tagged field may be left off the wire: Kafka omits a tagged field equal to its
    default. Structs compare field by field with omitted fields defaulted; None is the zero UUID."""
    codec = slot.codec
    if isinstance(codec, StructCodec):
        return isinstance(value, Mapping) and codec.holds_defaults(value)
    if codec.name == "uuid" and value is None:
        return bool(slot.default == uuid.UUID(int=0))
    return bool(value == slot.default)


def write_tag_section(out: bytearray, chunks: dict[int, bytes], unknown: Any) -> None:
    """Tagged fields in ascending tag order, unknown ones (kept from decoding) included."""
    if unknown:
        merged = dict(unknown)
        merged.update(chunks)
        chunks = merged
    out += uvarint_bytes(len(chunks))
    for tag in sorted(chunks):
        data = chunks[tag]
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise EncodeError(f"unknown tagged field {tag} must hold bytes", field=UNKNOWN_TAGS)
        out += uvarint_bytes(tag)
        out += uvarint_bytes(len(data))
        out += data


def fixed_run_sizes(run: list[_Slot]) -> tuple[tuple[str, int], ...]:
    """Each field of a fixed-width run with its size, for ``short_run``'s error."""
    return tuple((s.path, _fixed(s).size) for s in run)


def _fixed(slot: _Slot) -> Fixed:
    assert isinstance(slot.codec, Fixed)
    return slot.codec


def _fresh(value: Any) -> Any:
    """Defaults are shared templates; hand out copies of the mutable ones."""
    if isinstance(value, list):
        return []
    if isinstance(value, Body):
        return Body({k: _fresh(v) for k, v in value.items()})
    return value


def _literal(value: Any) -> str:
    if isinstance(value, uuid.UUID):
        return f"_UUID({str(value)!r})"
    if isinstance(value, float) and value != value:
        return "float('nan')"
    return repr(value)


def _fresh_expr(value: Any) -> str:
    """Source that builds a new default value: a literal, so no copying at run time."""
    if isinstance(value, list):
        return "[]"
    if isinstance(value, Body):
        items = ", ".join(f"{k!r}: {_fresh_expr(v)}" for k, v in value.items())
        return f"_Body({{{items}}})"
    return _literal(value)


def _emit_fresh(g: Gen, indent: int, target: str, value: Any) -> None:
    """``target = <a new default>``. A struct is filled key by key: a decoder sets every absent
    tagged struct of every element (three per partition of a Fetch response), and an empty Body
    filled by item assignment costs about two thirds of one built from a dict display."""
    if isinstance(value, Body) and value:
        made = g.var("t")
        fills = "; ".join(f"{made}[{k!r}] = {_fresh_expr(v)}" for k, v in value.items())
        g.emit(indent, f"{made} = {target} = _Body(); {fills}")
    else:
        g.emit(indent, f"{target} = {_fresh_expr(value)}")


def _template(g: Gen, value: Any) -> str:
    """A shared, read-only default for encoders: compared and read, never mutated."""
    if isinstance(value, list):
        return "[]"  # not (): tagged arrays compare against it, and () != []
    if isinstance(value, Body):
        name = g.var("D")
        g.lines.insert(0, f"{name} = {_fresh_expr(value)}")
        return name
    return _literal(value)


def _fit_value(codec: Primitive, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(codec, NullableStruct):
        codec = codec.inner
    if isinstance(codec, StructCodec):
        return codec.fit(value)
    if isinstance(codec, Array) and isinstance(codec.element, (StructCodec, NullableStruct)):
        return [_fit_value(codec.element, item) for item in value]
    return value


def _nested_structs(codec: Primitive) -> list[StructCodec]:
    if isinstance(codec, StructCodec):
        return [codec]
    if isinstance(codec, NullableStruct):
        return [codec.inner]
    if isinstance(codec, Array):
        return _nested_structs(codec.element)
    return []


def _all_structs(codec: StructCodec) -> list[StructCodec]:
    found = [codec]
    for slot in codec.slots + codec.tagged:
        for nested in _nested_structs(slot.codec):
            found.extend(_all_structs(nested))
    return found


def emit_tag_section(
    g: Gen, codec: StructCodec, read_slot: Callable[[_Slot], None], new_unknown: str
) -> None:
    """Emit the read of ``codec``'s tag section, shared by the Body and JSON backends so both accept
    and refuse the same bytes: ``read_slot`` emits a known tag's read (indent 4, bounded by
    ``stop``), ``new_unknown`` the statement that makes the ``unknown`` dict (tag -> bytes)."""
    where = f"{codec.name} tagged fields"
    g.emit(1, "if pos < end and buf[pos] == 0: pos += 1")
    g.emit(1, "else:")
    uv = UnsignedVarint()
    uv.emit_read(g, "ntags", 2, where)
    g.emit(2, "unknown = None")
    g.emit(2, "for _ in range(ntags):")
    uv.emit_read(g, "tag", 3, where)
    uv.emit_read(g, "size", 3, where)
    g.emit(3, f"if pos + size > end: raise _short(pos, size, end, {where!r})")
    g.emit(3, "stop = pos + size")
    keyword = "if"
    for slot in codec.tagged:
        g.emit(3, f"{keyword} tag == {slot.field.tag}:")
        read_slot(slot)
        keyword = "elif"
    g.emit(3, "else:" if codec.tagged else "if True:")
    g.emit(4, f"if unknown is None: {new_unknown}")
    g.emit(4, "unknown[tag] = bytes(buf[pos:stop])")
    g.emit(3, "pos = stop")


class MessageSchema(construct.Construct):
    """A construct for one message at one version.

    ``parse``/``build`` work like any construct (interpreted); ``compile()``
    goes through construct's compiler and yields the generated functions, which
    :meth:`compiled_codec` exposes for the hot path.
    """

    def __init__(self, spec: MessageSpec, version: int, flexible: bool | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.version = version
        self.flexible = spec.is_flexible(version) if flexible is None else flexible
        self.root = StructCodec(spec.name, spec.fields, version, self.flexible)
        self.name = None

    # construct protocol, interpreted -------------------------------------------------------
    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        start = stream.tell()
        data = memoryview(stream.read())
        value, pos = self.root.read(data, 0, len(data))
        stream.seek(start + pos)
        return value

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        out = bytearray()
        self.root.write(obj, out)
        stream.write(bytes(out))
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise construct.SizeofError("Kafka messages have no fixed size", path=path)

    # construct protocol, compiled ----------------------------------------------------------
    def _emitparse(self, code: Any) -> str:
        dec, _ = self._emit_into(code)
        return f"_decode_stream(io, {dec})"

    def _emitbuild(self, code: Any) -> str:
        _, enc = self._emit_into(code)
        return f"_encode_stream(obj, io, {enc})"

    def _emit_into(self, code: Any) -> tuple[str, str]:
        emitted: dict[int, tuple[str, str]] = code.__dict__.setdefault("kafkapy_emitted", {})
        if id(self) in emitted:
            return emitted[id(self)]
        if not emitted:
            code.append("from kafkapy.protocol.schema import _module_runtime\n"
                        "globals().update(_module_runtime())\n")
        g = Gen(namespace=f"m{code.allocateId()}_")
        names = self.root.emit_functions(g)
        self._emitted_fit = self.root.emit_fit(g)
        code.append(g.source() + "\n")
        _CHECKERS[id(self)] = {id(s): s.check_keys for s in _all_structs(self.root)}
        _DEFAULT_TESTS[id(self)] = {id(slot): functools.partial(slot_holds_default, slot)
                                    for struct in _all_structs(self.root) for slot in struct.tagged}
        code.append(f"_check_keys.update(_checkers[{id(self)}])\n")
        code.append(f"_holds_default.update(_default_tests[{id(self)}])\n")
        emitted[id(self)] = names
        self._emitted_names = names
        return names

    def compiled_codec(self) -> tuple[Any, Any]:
        """The generated (decode, encode) functions, compiled through construct once."""
        fns: tuple[Any, Any] | None = self.__dict__.get("_fns")
        if fns is None:
            module = self.compile().module
            dec, enc = self._emitted_names
            fns = (getattr(module, dec), getattr(module, enc))
            self.__dict__["_fns"] = fns
            self.__dict__["_fit"] = getattr(module, self._emitted_fit)
        return fns

    def compiled_fit(self) -> Any:
        """The generated ``fit`` of the whole message: what :meth:`StructCodec.fit` does, several
        times faster (handlers that write one body for all versions run it on every answer)."""
        fit = self.__dict__.get("_fit")
        if fit is None:
            self.compiled_codec()
            fit = self.__dict__["_fit"]
        return fit


_CHECKERS: dict[int, dict[int, Any]] = {}
_DEFAULT_TESTS: dict[int, dict[int, Any]] = {}


def _decode_stream(io: Any, fn: Any) -> Any:
    start = io.tell()
    data = memoryview(io.read())
    value, pos = fn(data, 0, len(data))
    io.seek(start + pos)
    return value


def _encode_stream(obj: Any, io: Any, fn: Any) -> Any:
    out = bytearray()
    fn(obj, out)
    io.write(bytes(out))
    return obj


def _module_runtime() -> dict[str, Any]:
    names = dict(RUNTIME)
    names.update({
        "_struct": struct,
        "_Body": Body,
        "_write_tags": write_tag_section,
        "_decode_stream": _decode_stream,
        "_encode_stream": _encode_stream,
        "_checkers": _CHECKERS,
        "_check_keys": {},
        "_default_tests": _DEFAULT_TESTS,
        "_holds_default": {},
        "UUID": uuid.UUID,
    })
    return names
