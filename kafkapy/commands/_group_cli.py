"""What ``kafkapy groups`` and ``kafkapy share-groups`` print and parse alike, as Kafka's group
tools do: the padded tables, ``--topic T[:P,P]``, ``--to-datetime`` and the offset a reset to a
time lands on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from kafkapy.commands._partitions import LATEST, PartitionClient
from kafkapy.log.checkpoint import java_integer

__all__ = ["NONE", "Usage", "datetime_ms", "offset_at_time", "table", "topic_arguments"]

NONE = "-"  # an empty cell, as Kafka's tools print one (MISSING_COLUMN_VALUE)


class Usage(Exception):
    """A mistake in the command line, told in one line as Kafka's tools tell it."""


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns one space apart, None as ``-``."""
    cells = [[NONE if value is None else str(value) for value in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in (list(headers), *cells))


def topic_arguments(entries: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    """``--topic`` values: a topic with the partitions named after its colon, or None for all of them."""
    parsed: list[tuple[str, list[int] | None]] = []
    for entry in entries:
        topic, _, partitions = entry.partition(":")
        if not partitions:
            parsed.append((topic, None))
            continue
        try:
            parsed.append((topic, [java_integer(p.strip(), 32) for p in partitions.split(",")]))
        except ValueError:
            raise Usage(f"--topic {entry!r}: partitions must be numbers, as in {topic}:0,1") from None
    return parsed


def datetime_ms(text: str) -> int:
    """``--to-datetime``: ISO 8601 (Kafka's YYYY-MM-DDTHH:mm:SS.sss), UTC unless it gives an offset."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise Usage(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def offset_at_time(client: PartitionClient, topic: str, partition: int, when_ms: int) -> int:
    """The first offset at or after ``when_ms``; the log end when every record is older, as Kafka's
    reset tools take it."""
    found = client.list_offset(topic, partition, when_ms)
    return client.list_offset(topic, partition, LATEST) if found < 0 else found
