"""Number arguments typed as Kafka's tools type them (joptsimple options of Java short, int or
long): a value past the Java type is a usage error, as it is there, not a request that the encoder
cannot write (an EncodeError traceback)."""

from __future__ import annotations

import argparse

from kafkapy.log.checkpoint import java_integer

__all__ = ["java_int", "java_long", "java_short"]


def _typed(text: str, bits: int, name: str) -> int:
    try:
        return java_integer(text.strip(), bits)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a Java {name} (a whole number from "
                                         f"{-(1 << (bits - 1))} to {(1 << (bits - 1)) - 1})") from None


def java_short(text: str) -> int:
    return _typed(text, 16, "short")


def java_int(text: str) -> int:
    return _typed(text, 32, "int")


def java_long(text: str) -> int:
    return _typed(text, 64, "long")
