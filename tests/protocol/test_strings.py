"""Strings are read as Kafka reads them: Java's ``new String(bytes, UTF_8)``, the oracle here.

Java itself (``JavaStrings.java`` beside this file, run by ``java``) reads every case; kafkapy's
reading must give the same UTF-16 code units: malformed input as U+FFFD, one per sequence as Java
cuts them. Valid UTF-8 reads as a strict decode reads it.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.protocol import decode_request, encode_request, message_schema
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.primitives import Text
from kafkapy.protocol.strings import decode_string

JAVA = shutil.which("java")
ORACLE = Path(__file__).with_name("JavaStrings.java")

# Pieces that meet each of the decoders' rules: surrogates written in UTF-8 (0xED 0xA0-0xBF, the
# one case where Python's "replace" cuts differently), overlong forms, code points past U+10FFFF,
# lead bytes no UTF-8 has, sequences cut short, and valid characters of each length.
PIECES = [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0", b"\xed\x9f\xbf", b"\xe0\x80\x80", b"\xe0\xa0",
          b"\xc0\xaf", b"\xc1", b"\xf0\x80\x80\x80", b"\xf0\x90\x80", b"\xf0\x9f", b"\xf4\x90\x80\x80",
          b"\xf5", b"\xf8\x88\x80\x80\x80", b"\xff", b"\x80", b"\xbf", b"a", b"\x00", b"\xc3", b"\xc3\xa9",
          b"\xe2\x82", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xf4\x8f\xbf\xbf"]


def _cases() -> list[bytes]:
    rng = random.Random(24)
    cases = [bytes([b]) for b in range(256)]
    cases += [bytes([a, b]) for a in range(0x80, 0x100) for b in range(256)]
    cases += [bytes([0xED, b, c]) for b in range(0x80, 0xC0) for c in (0x41, 0x80, 0xBF, 0xC0)]
    cases += [b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 7))) for _ in range(20_000)]
    cases += [rng.randbytes(rng.randint(1, 10)) for _ in range(20_000)]
    return cases


def _code_units(text: str) -> str:
    data = text.encode("utf-16-be", "surrogatepass")
    return " ".join(format(int.from_bytes(data[i:i + 2], "big"), "x") for i in range(0, len(data), 2))


@pytest.mark.skipif(JAVA is None, reason="JAVA NOT INSTALLED: the Java string oracle test SKIPPED")
def test_strings_read_as_java_reads_them() -> None:
    assert JAVA is not None
    cases = _cases()
    answer = subprocess.run([JAVA, str(ORACLE)], input="".join(c.hex() + "\n" for c in cases),
                            capture_output=True, text=True, timeout=120, check=True)
    java = answer.stdout.splitlines()
    assert len(java) == len(cases)
    differ = [(case.hex(), _code_units(decode_string(case)), units)
              for case, units in zip(cases, java) if _code_units(decode_string(case)) != units]
    assert differ == []
    # Python's own "replace" is not enough: the surrogate case cuts differently.
    assert decode_string(b"a\xed\xa0\x80b") == "a\ufffdb" != b"a\xed\xa0\x80b".decode("utf-8", "replace")


@given(st.text(st.characters(blacklist_categories=["Cs"])))  # text UTF-8 can hold: no lone surrogates
def test_valid_utf8_reads_as_a_strict_decode(text: str) -> None:
    data = text.encode("utf-8")
    assert decode_string(data) == text
    assert decode_string(memoryview(data)) == text


@pytest.mark.parametrize("compact", [False, True])
@given(data=st.binary(max_size=40))
def test_the_string_primitive_reads_any_bytes_as_java_does(compact: bool, data: bytes) -> None:
    """Both paths (interpreted and compiled) of the string primitive; writing the value back gives
    its UTF-8, so valid input round-trips byte for byte."""
    text = Text(compact, False)
    wire = bytearray()
    text.write(data.decode("utf-8", "surrogateescape"), wire, "f")  # escapes write the raw bytes
    prefix = len(wire) - len(data)
    assert bytes(wire[prefix:]) == data
    value, end = text.read(memoryview(bytes(wire)), 0, len(wire), "f")
    assert (value, end) == (decode_string(data), len(wire))
    again = bytearray()
    text.write(value, again, "f")
    assert text.read(memoryview(bytes(again)), 0, len(again), "f")[0] == value  # U+FFFD is valid text
    if decode_string(data) == data.decode("utf-8", "surrogateescape"):  # valid input: the same bytes
        assert again == wire


def test_a_request_with_strings_that_are_not_utf8_decodes_as_kafka_reads_it() -> None:
    """The codec's compiled request decoder and the hand-read header: the group id and the client
    id come back with U+FFFD where the bytes were malformed (the sender wrote them as escapes)."""
    frame = encode_request(ApiKey.FIND_COORDINATOR, 3, 5, "client\udcff",
                           {"key": "group\udced\udca0\udc80", "key_type": 0})
    assert b"client\xff" in frame and b"group\xed\xa0\x80" in frame
    request = decode_request(frame)
    assert request.client_id == "client\ufffd"
    assert request.body.key == "group\ufffd"
    schema = message_schema(ApiKey.FIND_COORDINATOR, "request", 3)
    body = schema.build({"key": "group\udcff", "key_type": 0})
    assert schema.parse(body)["key"] == "group\ufffd"  # the interpreted path too
