"""Kafka's primitive types, each in two forms that must agree.

Every primitive can *interpret* (``read``/``write`` on a buffer and position)
and can *emit* the same logic as Python source for the schema compiler
(``emit_read``/``emit_write``). The generated code works on ``buf`` (a
memoryview), ``pos`` and ``end`` locals, so reads are ``unpack_from`` calls
with no stream objects in between.

House rule: every read checks the bytes it needs against ``end`` *before*
touching them, in both forms. construct's own compiled parsers skip that check
(a declared 16-byte string with 3 bytes left comes back as 3 bytes); ours raise
DecodeError. A declared length larger than what remains is rejected before any
allocation, so a hostile length prefix costs nothing.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol.records import Records
from kafkapy.protocol.strings import JAVA_REPLACE

__all__ = [
    "Array",
    "Binary",
    "Fixed",
    "Gen",
    "Primitive",
    "RecordsField",
    "Text",
    "UnsignedVarint",
    "Varint",
    "Varlong",
    "fixed",
    "read_uvarint",
    "uvarint_bytes",
]

ZERO_UUID = uuid.UUID(int=0)

# Decoders read from bytes (the fast case: indexing, unpack_from and str() are all
# quicker on bytes than on a memoryview), a memoryview, or a frame body kept as a bytearray.
Buffer = bytes | bytearray | memoryview


class Gen:
    """Collects generated source lines and the globals they need."""

    def __init__(self, namespace: str = "") -> None:
        self.lines: list[str] = []
        self.namespace = namespace  # keeps names unique when several messages share one module
        self._counter = 0

    def var(self, prefix: str = "v") -> str:
        self._counter += 1
        return f"_{self.namespace}{prefix}{self._counter}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def source(self) -> str:
        return "\n".join(self.lines)


# --- runtime helpers shared by interpreted and generated code -----------------------------

def short(pos: int, need: int, end: int, field: str) -> DecodeError:
    return DecodeError(
        f"needed {need} bytes for {field} but only {max(end - pos, 0)} remain",
        offset=pos, field=field, truncated=True,
    )


def too_many(pos: int, count: int, end: int, field: str) -> DecodeError:
    """An array whose count is more than the bytes left could hold (every element takes one at
    least): it says elements, where ``short`` would have called the count bytes needed."""
    return DecodeError(
        f"{field} holds {count} elements, more than the {max(end - pos, 0)} bytes that remain could hold",
        offset=pos, field=field, truncated=True,
    )


def short_run(pos: int, end: int, fields: tuple[tuple[str, int], ...]) -> DecodeError:
    """The error for a run of fixed-width fields read as one struct that does not fit: it names
    the first field of the run that runs past ``end``, at that field's offset, as reading the
    fields one by one would (not the run's first field with the run's total size)."""
    cut = 0
    while cut < len(fields) - 1 and pos + fields[cut][1] <= end:
        pos += fields[cut][1]
        cut += 1
    field, size = fields[cut]
    return short(pos, size, end, field)


def bad(pos: int, field: str, reason: str) -> DecodeError:
    return DecodeError(reason, offset=pos, field=field)


def read_uvarint(buf: Buffer, pos: int, end: int, field: str) -> tuple[int, int]:
    """Unsigned varint, at most 5 bytes as Kafka's ByteUtils.readUnsignedVarint allows."""
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise short(pos, 1, end, field)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise bad(start, field, "unsigned varint longer than 5 bytes")


def read_varint64(buf: Buffer, pos: int, end: int, field: str, max_bytes: int) -> tuple[int, int]:
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise short(pos, 1, end, field)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift >= 7 * max_bytes:
            raise bad(start, field, f"varint longer than {max_bytes} bytes")


_SMALL_UVARINTS = [bytes([i]) for i in range(128)]


def uvarint_bytes(value: int) -> bytes:
    if 0 <= value < 128:
        return _SMALL_UVARINTS[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise EncodeError(f"{value} does not fit an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag_bytes(value: int, bits: int) -> bytes:
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise EncodeError(f"{value} does not fit a {bits}-bit varint")
    raw = (value << 1) ^ (value >> (bits - 1))
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def to_uuid(value: Any) -> bytes:
    """A uuid field's 16 bytes. Anything else is a TypeError, which the callers turn into an
    EncodeError naming the field (an EncodeError raised here could not name it)."""
    if value is None:
        return ZERO_UUID.bytes
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, str):
        try:
            return uuid.UUID(value).bytes
        except ValueError:
            raise TypeError("give a uuid.UUID, its string or its 16 bytes") from None
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    raise TypeError("give a uuid.UUID, its string or its 16 bytes")


#: A bool field's wire value by its value: True and False, and so 1 and 0, which hash as they do.
#: Anything else (a string "false", None, 2) fails the lookup, rather than being read for its truth.
BOOLS = {False: False, True: True}


def to_bool(value: Any) -> bool:
    try:
        return BOOLS[value]
    except (KeyError, TypeError):
        raise TypeError("give True or False") from None


def encode_text(value: Any, field: str) -> bytes:
    if isinstance(value, str):
        # surrogateescape: a caller (a test of a broker) writes bytes that are not UTF-8 as escapes
        return value.encode("utf-8", "surrogateescape")
    raise EncodeError(f"expected str, got {type(value).__name__}", field=field)


def binary_value(value: Any, field: str) -> bytes | memoryview:
    if isinstance(value, (bytes, memoryview)):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    raw = getattr(value, "raw", None)  # Records keeps its source bytes
    if raw is not None:
        return raw  # type: ignore[no-any-return]
    raise EncodeError(f"expected bytes, got {type(value).__name__}", field=field)


class _ArrayStructs(dict):  # type: ignore[type-arg]
    """struct.Struct objects for "n numbers of one format", made on first use."""

    def __init__(self, fmt: str) -> None:
        super().__init__()
        self.fmt = fmt

    def __missing__(self, count: int) -> struct.Struct:
        made = self[count] = struct.Struct(f">{count}{self.fmt}")
        return made


ARRAY_STRUCTS = {fmt: _ArrayStructs(fmt) for fmt in "bhHiIqd"}


RUNTIME: dict[str, Any] = {
    "_ARRAY_STRUCTS": ARRAY_STRUCTS,
    "_Records": Records,
    "_short": short,
    "_short_run": short_run,
    "_too_many": too_many,
    "_bad": bad,
    "_uvarint": read_uvarint,
    "_uvarint_bytes": uvarint_bytes,
    "_SMALL_UV": _SMALL_UVARINTS,
    "_to_uuid": to_uuid,
    "_BOOLS": BOOLS,
    "_UUID": uuid.UUID,
    "_ZERO_UUID": ZERO_UUID,
    "_encode_text": encode_text,
    "_binary_value": binary_value,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "EncodeError": EncodeError,
}


class Primitive:
    """A Kafka wire type: interpreted and emitted forms of the same rules."""

    name = "primitive"
    # Fixed-width types have a struct format char, so the compiler can merge runs of them.
    fmt: str | None = None

    def read(self, buf: Buffer, pos: int, end: int, field: str) -> tuple[Any, int]:
        raise NotImplementedError

    def write(self, value: Any, out: bytearray, field: str) -> None:
        raise NotImplementedError

    def emit_read(self, g: Gen, target: str, ind: int, field: str, end: str = "end") -> None:
        raise NotImplementedError

    def emit_write(self, g: Gen, expr: str, ind: int, field: str) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class Fixed(Primitive):
    """Fixed-width big-endian numbers, bool and uuid."""

    fmt: str

    def __init__(self, name: str, fmt: str) -> None:
        self.name = name
        self.fmt = fmt
        self.size = struct.calcsize(">" + fmt)
        self._struct = struct.Struct(">" + fmt)

    # Conversions between the struct value and the Python value; identity for numbers.
    def from_wire(self, value: Any) -> Any:
        if self.name == "uuid":
            return uuid.UUID(bytes=bytes(value))
        return value

    def to_wire(self, value: Any) -> Any:
        if self.name == "uuid":
            return to_uuid(value)
        if self.name == "bool":
            return to_bool(value)
        return value

    def wire_expr(self, expr: str) -> str:
        if self.name == "uuid":
            return f"_to_uuid({expr})"
        if self.name == "bool":
            return f"_BOOLS[{expr}]"
        return expr

    def value_expr(self, expr: str) -> str:
        if self.name == "uuid":
            return f"_UUID(bytes=bytes({expr}))"
        return expr

    def read(self, buf: Buffer, pos: int, end: int, field: str) -> tuple[Any, int]:
        if pos + self.size > end:
            raise short(pos, self.size, end, field)
        return self.from_wire(self._struct.unpack_from(buf, pos)[0]), pos + self.size

    def write(self, value: Any, out: bytearray, field: str) -> None:
        try:
            out += self._struct.pack(self.to_wire(value))
        except (struct.error, TypeError) as exc:
            raise EncodeError(f"{value!r} is not a valid {self.name}: {exc}", field=field) from None

    def emit_read(self, g: Gen, target: str, ind: int, field: str, end: str = "end") -> None:
        g.emit(ind, f"if pos + {self.size} > {end}: raise _short(pos, {self.size}, {end}, {field!r})")
        fmt = ">" + self.fmt
        g.emit(ind, f"{target} = {self.value_expr(f'_unpack_from({fmt!r}, buf, pos)[0]')}")
        g.emit(ind, f"pos += {self.size}")

    def emit_write(self, g: Gen, expr: str, ind: int, field: str) -> None:
        fmt = ">" + self.fmt
        g.emit(ind, f"out += _pack({fmt!r}, {self.wire_expr(expr)})")


FIXED: dict[str, Fixed] = {
    name: Fixed(name, fmt)
    for name, fmt in (
        ("bool", "?"), ("int8", "b"), ("int16", "h"), ("uint16", "H"), ("int32", "i"),
        ("uint32", "I"), ("int64", "q"), ("float64", "d"), ("uuid", "16s"),
    )
}


def fixed(name: str) -> Fixed:
    return FIXED[name]


class UnsignedVarint(Primitive):
    name = "unsigned_varint"

    def read(self, buf: Buffer, pos: int, end: int, field: str) -> tuple[Any, int]:
        return read_uvarint(buf, pos, end, field)

    def write(self, value: Any, out: bytearray, field: str) -> None:
        out += uvarint_bytes(value)

    def emit_read(self, g: Gen, target: str, ind: int, field: str, end: str = "end") -> None:
        # Fast path for the overwhelmingly common one-byte case; 255 stands in for "no byte left".
        g.emit(ind, f"{target} = buf[pos] if pos < {end} else 255")
        g.emit(ind, f"if {target} < 128: pos += 1")
        g.emit(ind, f"else: {target}, pos = _uvarint(buf, pos, {end}, {field!r})")

    def emit_write(self, g: Gen, expr: str, ind: int, field: str) -> None:
        g.emit(ind, f"out += _uvarint_bytes({expr})")


class Varint(Primitive):
    """Zigzag-encoded signed varint (int32), as used inside record batches."""

    name = "varint"
    bits = 32
    max_bytes = 5

    def read(self, buf: Buffer, pos: int, end: int, field: str) -> tuple[Any, int]:
        return read_varint64(buf, pos, end, field, self.max_bytes)

    def write(self, value: Any, out: bytearray, field: str) -> None:
        out += zigzag_bytes(value, self.bits)


class Varlong(Varint):
    name = "varlong"
    bits = 64
    max_bytes = 10


def emit_length(g: Gen, n: str, ind: int, field: str, compact: bool, width: str, end: str) -> None:
    """Read a length prefix into ``n``; compact lengths are stored plus one."""
    if compact:
        UnsignedVarint().emit_read(g, n, ind, field, end)
        g.emit(ind, f"{n} -= 1")
    else:
        fmt, size = (">h", 2) if width == "int16" else (">i", 4)
        g.emit(ind, f"if pos + {size} > {end}: raise _short(pos, {size}, {end}, {field!r})")
        g.emit(ind, f"{n} = _unpack_from({fmt!r}, buf, pos)[0]; pos += {size}")


def emit_length_or_null(
    g: Gen, n: str, ind: int, field: str, codec: Any, end: str, target: str, null: str, kind: str
) -> None:
    """Read ``codec``'s length prefix into ``n`` and handle a null one (``target = null``, or the
    error of a non-nullable ``kind``); what follows is the ``else:`` for a present value, so both
    generated backends share one reading of the prefix and one error."""
    emit_length(g, n, ind, field, codec.compact, codec.width, end)
    g.emit(ind, f"if {n} < 0:")
    if codec.nullable:
        g.emit(ind + 1, f"{target} = {null}")
    else:
        g.emit(ind + 1, f"raise _bad(pos, {field!r}, 'null in a non-nullable {kind}')")


def _read_length(
    buf: Buffer, pos: int, end: int, field: str, compact: bool, width: str
) -> tuple[int, int]:
    if compact:
        n, pos = read_uvarint(buf, pos, end, field)
        return n - 1, pos
    size = 2 if width == "int16" else 4
    if pos + size > end:
        raise short(pos, size, end, field)
    return struct.unpack_from(">h" if size == 2 else ">i", buf, pos)[0], pos + size


def _length_prefix(n: int, compact: bool, width: str) -> bytes:
    if compact:
        return uvarint_bytes(n + 1)
    return struct.pack(">h" if width == "int16" else ">i", n)


def _emit_write_length(g: Gen, n: str, ind: int, compact: bool, width: str) -> None:
    if compact:
        g.emit(ind, f"out += _SMALL_UV[{n} + 1] if {n} < 127 else _uvarint_bytes({n} + 1)")
    else:
        g.emit(ind, f"out += _pack({'>h' if width == 'int16' else '>i'!r}, {n})")


class _LengthPrefixed(Primitive):
    """A length (int16, int32 or compact varint), then that many bytes; -1 (compact: 0) is null.

    Subclasses say how bytes become a value and back, in both forms: ``value``/``value_source``
    and ``payload``/``payload_source``.
    """

    width = "int32"
    kind = "bytes"

    def __init__(self, compact: bool, nullable: bool) -> None:
        self.compact = compact
        self.nullable = nullable
        self.name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + self.kind

    def value(self, buf: Buffer, pos: int, end: int) -> Any:
        raise NotImplementedError

    def value_source(self, n: str) -> str:
        raise NotImplementedError

    def payload(self, value: Any, field: str) -> bytes | memoryview:
        raise NotImplementedError

    def payload_source(self, v: str, field: str) -> str:
        raise NotImplementedError

    def read(self, buf: Buffer, pos: int, end: int, field: str) -> tuple[Any, int]:
        start = pos
        n, pos = _read_length(buf, pos, end, field, self.compact, self.width)
        if n < 0:
            if self.nullable:
                return None, pos
            raise bad(start, field, f"null in a non-nullable {self.kind}")
        if pos + n > end:
            raise short(pos, n, end, field)
        return self.value(buf, pos, pos + n), pos + n

    def write(self, value: Any, out: bytearray, field: str) -> None:
        if value is None:
            if not self.nullable:
                raise EncodeError(f"null in a non-nullable {self.kind}", field=field)
            out += _length_prefix(-1, self.compact, self.width)
            return
        data = self.payload(value, field)
        out += _length_prefix(len(data), self.compact, self.width)
        out += data

    def emit_read(self, g: Gen, target: str, ind: int, field: str, end: str = "end") -> None:
        n = g.var("n")
        emit_length_or_null(g, n, ind, field, self, end, target, "None", self.kind)
        g.emit(ind, "else:")
        g.emit(ind + 1, f"if pos + {n} > {end}: raise _short(pos, {n}, {end}, {field!r})")
        g.emit(ind + 1, f"{target} = {self.value_source(n)}; pos += {n}")

    def emit_write(self, g: Gen, expr: str, ind: int, field: str) -> None:
        v, b = g.var("s"), g.var("b")
        g.emit(ind, f"{v} = {expr}")
        g.emit(ind, f"if {v} is None:")
        if self.nullable:
            g.emit(ind + 1, f"out += {_length_prefix(-1, self.compact, self.width)!r}")
        else:
            g.emit(ind + 1, f"raise EncodeError('null in a non-nullable {self.kind}', field={field!r})")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"{b} = {self.payload_source(v, field)}")
        _emit_write_length(g, f"len({b})", ind + 1, self.compact, self.width)
        g.emit(ind + 1, f"out += {b}")


class Text(_LengthPrefixed):
    """(compact) (nullable) string: an int16 or unsigned-varint length, then UTF-8, read as Java
    reads it (kafkapy.protocol.strings: malformed bytes become U+FFFD, as Kafka serves them)."""

    width = "int16"
    kind = "string"

    def value(self, buf: Buffer, pos: int, end: int) -> Any:
        return str(buf[pos:end], "utf-8", JAVA_REPLACE)

    def value_source(self, n: str) -> str:
        return f"str(buf[pos:pos + {n}], 'utf-8', {JAVA_REPLACE!r})"

    def payload(self, value: Any, field: str) -> bytes:
        data = encode_text(value, field)
        if not self.compact and len(data) > 0x7FFF:
            raise EncodeError(f"string of {len(data)} bytes exceeds int16 length", field=field)
        return data

    def payload_source(self, v: str, field: str) -> str:
        # A str is encoded inline (the common case, a call saved per string); anything else goes
        # through encode_text, which accepts str subclasses and names the field otherwise.
        return (f"({v}.encode('utf-8', 'surrogateescape') if type({v}) is str "
                f"else _encode_text({v}, {field!r}))")


class Binary(_LengthPrefixed):
    """(compact) (nullable) bytes: an int32 or unsigned-varint length, then raw bytes."""

    def value(self, buf: Buffer, pos: int, end: int) -> Any:
        return bytes(buf[pos:end])

    def value_source(self, n: str) -> str:
        return f"bytes(buf[pos:pos + {n}])"

    def payload(self, value: Any, field: str) -> bytes | memoryview:
        return binary_value(value, field)

    def payload_source(self, v: str, field: str) -> str:
        return f"_binary_value({v}, {field!r})"


class RecordsField(Binary):
    """A ``records`` field: stays lazy, a Records object over a zero-copy slice of the input,
    decoded only when iterated and re-encoded from its raw bytes."""

    kind = "records"

    def value(self, buf: Buffer, pos: int, end: int) -> Any:
        return Records(memoryview(buf)[pos:end])

    def value_source(self, n: str) -> str:
        return f"_Records(memoryview(buf)[pos:pos + {n}])"


class Array(Primitive):
    """(compact) (nullable) array of a primitive or of a struct.

    ``element`` is a Primitive, or an object with the same four methods for
    structs (the schema compiler's StructCodec). A count larger than the bytes
    remaining is rejected first: every element takes at least one byte except
    zero-field structs, and Kafka's own readers refuse such counts too.
    """

    def __init__(self, element: Primitive, compact: bool, nullable: bool, width: str = "int32") -> None:
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.width = width
        self.name = f"{'compact_' if compact else ''}{'nullable_' if nullable else ''}array[{element!r}]"

    def read(self, buf: Buffer, pos: int, end: int, field: str) -> tuple[Any, int]:
        start = pos
        n, pos = _read_length(buf, pos, end, field, self.compact, self.width)
        if n < 0:
            if self.nullable:
                return None, pos
            raise bad(start, field, "null in a non-nullable array")
        el = self.element
        if isinstance(el, Fixed) and el.name not in ("uuid", "bool"):
            if pos + n * el.size > end:  # numbers: the bytes needed are known, as emit_read says
                raise short(pos, n * el.size, end, field)
        elif n > end - pos:
            raise too_many(pos, n, end, field)
        items = []
        for _ in range(n):
            item, pos = self.element.read(buf, pos, end, field + "[]")
            items.append(item)
        return items, pos

    def write(self, value: Any, out: bytearray, field: str) -> None:
        if value is None:
            if not self.nullable:
                raise EncodeError("null in a non-nullable array", field=field)
            out += _length_prefix(-1, self.compact, self.width)
            return
        try:
            out += _length_prefix(len(value), self.compact, self.width)
        except (TypeError, struct.error) as exc:
            raise EncodeError(f"not an array: {exc}", field=field) from None
        for item in value:
            self.element.write(item, out, field + "[]")

    def emit_read(self, g: Gen, target: str, ind: int, field: str, end: str = "end") -> None:
        n, items, i = g.var("n"), g.var("a"), g.var("i")
        emit_length_or_null(g, n, ind, field, self, end, target, "None", "array")
        g.emit(ind, "else:")
        el = self.element
        if isinstance(el, Fixed) and el.name not in ("uuid", "bool"):
            # A run of fixed-width numbers is one unpack_from, with a Struct cached per count.
            size = g.var("z")
            g.emit(ind + 1, f"{size} = {n} * {el.size}")
            g.emit(ind + 1, f"if pos + {size} > {end}: raise _short(pos, {size}, {end}, {field!r})")
            g.emit(ind + 1, f"{target} = list(_ARRAY_STRUCTS[{el.fmt!r}][{n}].unpack_from(buf, pos)); "
                            f"pos += {size}")
            return
        g.emit(ind + 1, f"if {n} > {end} - pos: raise _too_many(pos, {n}, {end}, {field!r})")
        g.emit(ind + 1, f"{items} = []")
        g.emit(ind + 1, f"for {i} in range({n}):")
        item = g.var("e")
        el.emit_read(g, item, ind + 2, field + "[]", end)
        g.emit(ind + 2, f"{items}.append({item})")
        g.emit(ind + 1, f"{target} = {items}")

    def emit_write(self, g: Gen, expr: str, ind: int, field: str) -> None:
        v, item = g.var("s"), g.var("e")
        g.emit(ind, f"{v} = {expr}")
        g.emit(ind, f"if {v} is None:")
        if self.nullable:
            g.emit(ind + 1, f"out += {_length_prefix(-1, self.compact, self.width)!r}")
        else:
            g.emit(ind + 1, f"raise EncodeError('null in a non-nullable array', field={field!r})")
        g.emit(ind, "else:")
        _emit_write_length(g, f"len({v})", ind + 1, self.compact, self.width)
        el = self.element
        if isinstance(el, Fixed) and el.name not in ("uuid", "bool"):
            g.emit(ind + 1, f"out += _ARRAY_STRUCTS[{el.fmt!r}][len({v})].pack(*{v})")
            return
        g.emit(ind + 1, f"for {item} in {v}:")
        el.emit_write(g, item, ind + 2, field + "[]")
