"""A share group's ``share.auto.offset.reset``: Kafka's ShareGroupAutoOffsetResetStrategy (KIP-932,
with KIP-1106's ``by_duration``), sans I/O.

Three strategies say where a share group starts on a partition it never consumed: ``latest`` (the
high watermark), ``earliest`` (the log start) and ``by_duration:<ISO-8601 duration>`` (the first
record written at or after now less the duration). Kafka's clients' AutoOffsetResetStrategy parses
them; ``none``, which a consumer group may set, is refused for a share group. The duration is
java.time.Duration's text form (``PnDTnHnMn.nS``, signs allowed per part, letters in either case,
at most nine decimals of seconds), and a negative total is refused.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["BY_DURATION", "EARLIEST", "LATEST", "OffsetReset", "parse_share_offset_reset", "refusal"]

EARLIEST, LATEST, BY_DURATION = "earliest", "latest", "by_duration"
_NANOS_PER_MS = 1_000_000
_NANOS = {"D": 86_400 * 10**9, "H": 3_600 * 10**9, "M": 60 * 10**9, "S": 10**9}
# java.time.Duration.parse's grammar: sign, P, days, then T with hours, minutes, seconds.fraction
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


@attrs.frozen
class OffsetReset:
    """One strategy; ``duration_ns`` only for ``by_duration``."""

    kind: str
    duration_ns: int = 0

    def timestamp_ms(self, now_ms: int) -> int:
        """by_duration: the earliest record timestamp the group starts from (Kafka's
        Instant.now().minus(duration).toEpochMilli())."""
        return (now_ms * _NANOS_PER_MS - self.duration_ns) // _NANOS_PER_MS


def _duration_ns(text: str) -> int | None:
    """java.time.Duration.parse's value in nanoseconds, or None where it throws."""
    match = _DURATION.fullmatch(text)
    if match is None:
        return None
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if (days is None and time_part is None) or (time_part is not None and time_part.upper() == "T"):
        return None  # "P" alone, or a T with nothing after it
    total = sum(int(part) * _NANOS[unit] for part, unit in ((days, "D"), (hours, "H"), (minutes, "M"))
                if part is not None)
    if seconds is not None:
        nanos = int((fraction or "").ljust(9, "0"))
        whole = int(seconds) * _NANOS["S"]
        total += whole - nanos if seconds.startswith("-") else whole + nanos
    return -total if sign == "-" else total


def parse_share_offset_reset(text: str) -> OffsetReset:
    """The strategy ``text`` names; ValueError (with Kafka's reason) for anything else."""
    if text in (EARLIEST, LATEST):
        return OffsetReset(text)
    if text == BY_DURATION:
        raise ValueError("<:duration> part is missing in by_duration auto offset reset strategy.")
    prefix = f"{BY_DURATION}:"
    if text.startswith(prefix):
        duration = _duration_ns(text[len(prefix):])
        if duration is None:
            raise ValueError("Unable to parse duration string in by_duration offset reset strategy.")
        if duration < 0:
            raise ValueError("Negative duration is not supported in by_duration offset reset strategy.")
        return OffsetReset(BY_DURATION, duration)
    raise ValueError(f"Unknown auto offset reset strategy: {text}")


def refusal(name: str, text: str) -> str:
    """Kafka's ConfigException for a bad value (ShareGroupAutoOffsetResetStrategy.Validator)."""
    return (f"Invalid value {text} for configuration {name}: Invalid value `{text}` for configuration "
            f"{name}. The value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.")
