"""Every primitive, interpreted and generated, must accept and reject the same bytes."""

from __future__ import annotations

import math
import uuid
from typing import Any

import construct
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol.primitives import (
    FIXED,
    RUNTIME,
    Array,
    Binary,
    Gen,
    Primitive,
    RecordsField,
    Text,
    UnsignedVarint,
    Varint,
    Varlong,
)

PRIMITIVES: list[Primitive] = [
    *FIXED.values(),
    UnsignedVarint(),
    Text(False, False), Text(False, True), Text(True, False), Text(True, True),
    Binary(False, False), Binary(False, True), Binary(True, False), Binary(True, True),
    RecordsField(False, True), RecordsField(True, False),
    Array(FIXED["int32"], False, False), Array(FIXED["int32"], True, True),
    Array(Text(True, False), True, False), Array(FIXED["int16"], False, False, width="int16"),
    Array(FIXED["uuid"], True, False),
]


def generated_reader(prim: Primitive) -> Any:
    """Compile the primitive's emitted read code into a function, as the schema compiler does."""
    g = Gen()
    g.emit(0, "def read(buf, pos, end):")
    prim.emit_read(g, "value", 1, "f")
    g.emit(1, "return value, pos")
    namespace = dict(RUNTIME)
    exec(g.source(), namespace)
    return namespace["read"]


def generated_writer(prim: Primitive) -> Any:
    g = Gen()
    g.emit(0, "def write(value, out):")
    prim.emit_write(g, "value", 1, "f")
    namespace = dict(RUNTIME)
    exec(g.source(), namespace)
    return namespace["write"]


def interpreted_reader(prim: Primitive) -> Any:
    return lambda buf, pos, end: prim.read(buf, pos, end, "f")


def outcome(fn: Any, data: bytes) -> Any:
    try:
        value, pos = fn(memoryview(data), 0, len(data))
        if isinstance(value, float) and math.isnan(value):
            return ("nan", pos)  # NaN != NaN, yet both paths read the same NaN
        return value, pos
    except DecodeError as exc:
        return ("DecodeError", exc.truncated)


@pytest.mark.parametrize("prim", PRIMITIVES, ids=repr)
@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=40))
def test_interpreted_and_generated_reads_agree(prim: Primitive, data: bytes) -> None:
    assert outcome(interpreted_reader(prim), data) == outcome(generated_reader(prim), data)


def test_declared_string_longer_than_input_is_rejected_on_both_paths() -> None:
    """construct's own compiled PascalString returns the 3 bytes it found; ours must not."""
    data = b"\x00\x10abc"
    compiled = construct.Struct("s" / construct.PascalString(construct.Int16sb, "utf8")).compile()
    assert compiled.parse(data).s == "abc"  # the caveat this project guards against
    text = Text(False, False)
    for read in (interpreted_reader(text), generated_reader(text)):
        with pytest.raises(DecodeError) as info:
            read(memoryview(data), 0, len(data))
        assert info.value.truncated and info.value.offset == 2


def test_huge_array_count_is_rejected_before_allocation() -> None:
    data = b"\x7f\xff\xff\xff" + b"\x00" * 8
    arr = Array(FIXED["int32"], False, False)
    for read in (interpreted_reader(arr), generated_reader(arr)):
        with pytest.raises(DecodeError, match="only 8 remain"):
            read(memoryview(data), 0, len(data))


def test_varint_longer_than_five_bytes_is_rejected() -> None:
    data = b"\xff\xff\xff\xff\xff\x01"
    with pytest.raises(DecodeError, match="longer than 5"):
        UnsignedVarint().read(memoryview(data), 0, len(data), "v")


@pytest.mark.parametrize(("prim", "value"), [
    (FIXED["bool"], True), (FIXED["int8"], -128), (FIXED["int16"], 32767), (FIXED["uint16"], 65535),
    (FIXED["int32"], -(2**31)), (FIXED["uint32"], 2**32 - 1), (FIXED["int64"], 2**63 - 1),
    (FIXED["float64"], 1.5), (FIXED["uuid"], uuid.UUID(int=12345)),
    (UnsignedVarint(), 0), (UnsignedVarint(), 300), (UnsignedVarint(), 2**32 - 1),
    (Varint(), -1), (Varint(), 2**31 - 1), (Varlong(), -(2**63)),
    (Text(False, True), None), (Text(True, True), None), (Text(False, False), "héllo"),
    (Text(True, False), ""), (Binary(False, True), None), (Binary(True, False), b"\x00\xff"),
    (Array(FIXED["int32"], True, True), None), (Array(Text(False, False), False, False), ["a", "bc"]),
])
def test_round_trip_both_paths(prim: Primitive, value: Any) -> None:
    out = bytearray()
    prim.write(value, out, "f")
    decoded, end = prim.read(memoryview(bytes(out)), 0, len(out), "f")
    assert decoded == value and end == len(out)
    if not isinstance(prim, Varint):  # zigzag varints live inside record batches only
        generated = bytearray()
        generated_writer(prim)(value, generated)
        assert generated == out


@pytest.mark.parametrize(("prim", "value"), [
    (FIXED["int8"], 128), (FIXED["int32"], "1"), (Text(False, False), None), (Text(False, False), 5),
    (Binary(False, False), "text"), (Array(FIXED["int32"], False, False), None), (UnsignedVarint(), -1),
    (Text(False, False), "x" * 40000),
])
def test_invalid_values_raise_encode_error(prim: Primitive, value: Any) -> None:
    with pytest.raises(EncodeError):
        prim.write(value, bytearray(), "f")


def test_invalid_utf8_is_read_as_java_reads_it() -> None:
    """Java decodes strings leniently (U+FFFD for each malformed sequence), and so does kafkapy
    (tests/protocol/test_strings.py holds it to Java); what is written back is that text's UTF-8."""
    data = b"\x00\x02\xff\xfe"
    text = Text(False, False)
    value, _ = text.read(memoryview(data), 0, len(data), "f")
    assert value == "\ufffd\ufffd"
    out = bytearray()
    text.write(value, out, "f")
    assert bytes(out) == b"\x00\x06" + "\ufffd\ufffd".encode()
