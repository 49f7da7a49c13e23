"""Number arguments typed as Kafka's tools type them (joptsimple options of Java short, int or
long): a value past the Java type is a usage error, as it is there, not a request that the encoder
cannot write (an EncodeError traceback)."""

from __future__ import annotations

import argparse
import math

from kafkapy.log.checkpoint import java_integer

__all__ = ["java_int", "java_long", "java_short", "timeout_seconds"]

# Kafka's tools take --timeout as ms in a Java int (AbstractOptions.timeoutMs), kafkapy's in seconds.
MAX_TIMEOUT_S = ((1 << 31) - 1) / 1000


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


def timeout_seconds(text: str) -> float:
    """``--timeout``: more than 0 seconds, at most what Kafka's int of ms holds. Zero would make the
    socket non-blocking (a connect "in progress" error), and a negative, NaN or infinite one
    reached the socket and clock code as a traceback."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT_S:  # also false for NaN
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds above 0 and at most "
                                         f"{MAX_TIMEOUT_S:.3f}")
    return seconds
