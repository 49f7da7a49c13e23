"""Kafka's checkpoint text files, written atomically.

Layout (Kafka's CheckpointFile): a version line (0), a count line, then one
entry per line with space-separated fields. Kafka uses it for the log dir's
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` (entries ``topic partition offset``) and each
partition's ``leader-epoch-checkpoint`` (entries ``epoch start_offset``). A file with no
lines, or only its version line, holds no entries (Kafka's CheckpointReadBuffer reads it so).

A checkpoint is written to ``<name>.tmp``, fsynced, renamed over the old file
and the directory fsynced, so a crash leaves either the old or the new file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "CheckpointCorrupt", "java_integer", "read_checkpoint", "read_offsets", "write_atomically",
    "write_checkpoint", "write_offsets",
]

CHECKPOINT_VERSION = 0
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Integer.parseInt / Long.parseLong take (ASCII digits)


class CheckpointCorrupt(ValueError):
    """A checkpoint file that does not follow Kafka's layout; Kafka refuses to start on one too."""


def fsync_directory(path: Path) -> None:
    """Make a rename or unlink inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: Path, entries: Iterable[tuple[object, ...]]) -> None:
    rows = [" ".join(str(field) for field in entry) for entry in entries]
    write_atomically(path, "\n".join([str(CHECKPOINT_VERSION), str(len(rows)), *rows]) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """``<name>.tmp``, fsynced, renamed over ``path``, the directory fsynced: old or new, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def read_checkpoint(path: Path, fields: int) -> list[list[str]]:
    """The entries of a checkpoint, each split into ``fields`` strings; [] when the file is absent
    or stops before its count, as in Kafka."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise CheckpointCorrupt(f"{path}: not UTF-8 text") from None
    # Kafka's CheckpointReadBuffer: a file that ends before its count line (empty, or the version
    # alone) has no entries. Its CheckpointFile creates them empty, and a crash between creating
    # and writing one can leave one.
    if not lines:
        return []
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointCorrupt(f"{path}: expected version {CHECKPOINT_VERSION}, not {lines[0][:40]!r}")
    if len(lines) == 1:
        return []
    try:
        count = java_integer(lines[1], 32)
    except ValueError:
        raise CheckpointCorrupt(f"{path}: count {lines[1][:40]!r} is not a number") from None
    rows = [line.split() for line in lines[2:] if line.strip()]
    if len(rows) != count or any(len(row) != fields for row in rows):
        raise CheckpointCorrupt(f"{path}: expected {count} entries of {fields} fields")
    return rows


def java_integer(text: str, bits: int) -> int:
    """``text`` as Java's Integer.parseInt (bits 32) or Long.parseLong (64) reads it; ValueError
    where Java throws NumberFormatException (Python's int() also takes "1_000" and values past the
    range, which Kafka refuses and the rest of the broker could not encode)."""
    value = int(text) if _JAVA_INTEGER.fullmatch(text) else None
    if value is None or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(f"{text[:40]!r} is not a {bits}-bit integer")
    return value


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """A ``topic partition offset`` checkpoint."""
    write_checkpoint(
        path, ((topic, partition, offset) for (topic, partition), offset in sorted(offsets.items()))
    )


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    try:
        return {(topic, java_integer(partition, 32)): java_integer(offset, 64)
                for topic, partition, offset in read_checkpoint(path, 3)}
    except ValueError as exc:
        if isinstance(exc, CheckpointCorrupt):
            raise
        raise CheckpointCorrupt(f"{path}: {exc}") from None
