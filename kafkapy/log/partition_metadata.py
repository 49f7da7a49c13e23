"""``partition.metadata``: the topic id a partition directory belongs to (KIP-516).

Kafka's PartitionMetadataFile writes two lines, ``version: 0`` and ``topic_id: <id>`` (the id as
Kafka prints a Uuid: URL-safe base64 without padding), with no newline after the last, atomically.
It reads them back when the log opens; a log asked for with another topic id is refused with
InconsistentTopicIdException ("Tried to assign topic ID ... but log already contained topic ID
..."), so records of a deleted topic are never served as those of a new one with the same name.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from pathlib import Path

from kafkapy.log.checkpoint import CheckpointCorrupt, write_atomically

__all__ = [
    "PARTITION_METADATA",
    "InconsistentTopicId",
    "encode_partition_metadata",
    "read_partition_metadata",
    "write_partition_metadata",
]

PARTITION_METADATA = "partition.metadata"
CURRENT_VERSION = 0
_WHITE_SPACE = re.compile(r"\s+")
_INTEGER = re.compile(r"-?[0-9]{1,10}")
ZERO_UUID = uuid.UUID(int=0)


class InconsistentTopicId(ValueError):
    """A log's partition.metadata names another topic id (Kafka's InconsistentTopicIdException)."""

    def __init__(self, topic: str, partition: int, wanted: uuid.UUID, found: uuid.UUID) -> None:
        # Kafka's wording (LogManager.getOrCreateLog), its missing space after the comma too
        super().__init__(f"Tried to assign topic ID {kafka_uuid(wanted)} to log for topic partition "
                         f"{topic}-{partition},but log already contained topic ID {kafka_uuid(found)}")


def kafka_uuid(value: uuid.UUID) -> str:
    """A Uuid as Kafka prints it: URL-safe base64 of its 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def _parse_uuid(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def encode_partition_metadata(topic_id: uuid.UUID) -> str:
    return f"version: {CURRENT_VERSION}\ntopic_id: {kafka_uuid(topic_id)}"


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    write_atomically(directory / PARTITION_METADATA, encode_partition_metadata(topic_id))


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id in ``directory``'s partition.metadata; None when there is none. A malformed
    file is CheckpointCorrupt, as Kafka's PartitionMetadataReadBuffer refuses it."""
    path = directory / PARTITION_METADATA
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CheckpointCorrupt(f"{path}: not text") from None
    if len(lines) < 2:
        raise CheckpointCorrupt(f"{path}: expected a version line and a topic_id line")
    version = _WHITE_SPACE.split(lines[0].strip())
    topic = _WHITE_SPACE.split(lines[1].strip())
    if len(version) != 2 or not _INTEGER.fullmatch(version[1]):
        raise CheckpointCorrupt(f"{path}: malformed line {lines[0]!r}")
    if int(version[1]) < CURRENT_VERSION:
        raise CheckpointCorrupt(f"{path}: unrecognized version {version[1]}")
    if len(topic) != 2:
        raise CheckpointCorrupt(f"{path}: malformed line {lines[1]!r}")
    try:
        topic_id = _parse_uuid(topic[1])
    except (ValueError, binascii.Error):
        raise CheckpointCorrupt(f"{path}: malformed line {lines[1]!r}") from None
    if topic_id == ZERO_UUID:
        raise CheckpointCorrupt(f"{path}: invalid topic ID (all zeros)")
    return topic_id
