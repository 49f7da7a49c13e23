"""Strings read as Kafka reads them: Java's ``new String(bytes, UTF_8)``.

Kafka's generated readers (``Readable.readString``) and ``Utils.utf8`` never refuse bytes that
are not UTF-8: Java's decoder puts U+FFFD in place of each malformed sequence, and the request is
served with that string (a group id holding U+FFFD is just a group id; a topic name holding it
fails topic-name validation). kafkapy reads every string of a request the same way, so the same
bytes get the same answer.

Python's own ``"replace"`` handler cuts malformed input into the same sequences as OpenJDK's
decoder except in one case: a lead byte 0xED followed by 0xA0-0xBF (the UTF-8 form of a UTF-16
surrogate, which neither decoder accepts). Python replaces each of those bytes on its own; Java
takes the lead byte, the second byte and a third byte that continues them as one sequence (two
bytes when the third does not continue them or the input ends), so one U+FFFD. The handler
below is Python's rule with that case made Java's; ``tests/protocol/test_strings.py`` holds it
equal to ``java`` itself on random and crafted bytes.

The handler is registered with :mod:`codecs` as :data:`JAVA_REPLACE`, so a hot path decodes with
``str(data, "utf-8", JAVA_REPLACE)``: CPython's C decoder, which calls the handler only at a
malformed sequence, so valid input costs what a strict decode costs.
"""

from __future__ import annotations

import codecs

__all__ = ["JAVA_REPLACE", "decode_string"]

JAVA_REPLACE = "kafkapy.java-replace"
"""The ``errors=`` name under which :func:`_java_replace` is registered."""

_REPLACEMENT = "\ufffd"


def _java_replace(exc: UnicodeError) -> tuple[str, int]:
    """One U+FFFD for the malformed sequence at ``exc.start``, as long as OpenJDK takes it."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc  # registered for decoding only
    data, start = exc.object, exc.start
    if data[start] == 0xED and start + 1 < len(data) and 0xA0 <= data[start + 1] <= 0xBF:
        continues = start + 2 < len(data) and data[start + 2] & 0xC0 == 0x80
        return _REPLACEMENT, start + (3 if continues else 2)
    return _REPLACEMENT, exc.end


codecs.register_error(JAVA_REPLACE, _java_replace)


def decode_string(data: bytes | bytearray | memoryview) -> str:
    """``data`` as Kafka's broker reads a STRING field's bytes (malformed UTF-8 as U+FFFD)."""
    return str(data, "utf-8", JAVA_REPLACE)
