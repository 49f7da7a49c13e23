"""Committed offsets, per group and partition, as the coordinator last wrote them.

Kept apart from the groups themselves because every group type has them (classic and KIP-848
groups share the namespace and the OffsetCommit/OffsetFetch APIs), and because a group may have
offsets and no members at all (a consumer that assigns partitions itself commits with
generation -1). The store holds only what ``__consumer_offsets`` already holds: the coordinator
puts a commit here once its record is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import attrs

from kafkapy.errors import ErrorCode
from kafkapy.groups.records import OffsetCommitKey, OffsetCommitValue

__all__ = ["NO_OFFSET", "OffsetEntry", "OffsetStore", "commit_refusal", "metadata_too_large"]

NO_OFFSET = -1  # OffsetFetch's committed_offset for a partition with no commit


def commit_refusal(readable: bool, exists: bool, metadata: str, max_metadata_bytes: int) -> ErrorCode | None:
    """Why one partition of an OffsetCommit is not written, in Kafka's order (the topic's READ, the
    partition's existence, ``offset.metadata.max.bytes``), or None: the same for every version."""
    if not readable:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if not exists:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if metadata_too_large(metadata, max_metadata_bytes):
        return ErrorCode.OFFSET_METADATA_TOO_LARGE
    return None


def metadata_too_large(metadata: str, max_metadata_bytes: int) -> bool:
    """``offset.metadata.max.bytes`` as Kafka applies it: to the length of the Java string, in
    UTF-16 code units, not to its encoded bytes (so 3000 'é' fit under 4096, as in Kafka)."""
    return len(metadata.encode("utf-16-le")) // 2 > max_metadata_bytes


@attrs.frozen
class OffsetEntry:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    # OffsetCommit v1's explicit commit time (ms); None: the coordinator's clock when written.
    commit_timestamp: int | None = None


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}

    def put(self, key: OffsetCommitKey, value: OffsetCommitValue) -> None:
        self._by_group.setdefault(key.group, {})[(key.topic, key.partition)] = value

    def get(self, group: str, topic: str, partition: int) -> OffsetCommitValue | None:
        return self._by_group.get(group, {}).get((topic, partition))

    def delete(self, group: str, topic: str, partition: int) -> None:
        offsets = self._by_group.get(group)
        if offsets is not None:
            offsets.pop((topic, partition), None)
            if not offsets:
                del self._by_group[group]

    def drop_group(self, group: str) -> None:
        self._by_group.pop(group, None)

    def groups(self) -> list[str]:
        return list(self._by_group)

    def clear(self) -> None:
        """Every group's offsets gone (a broker reset: its log is emptied too)."""
        self._by_group.clear()

    def partitions(self, group: str) -> list[tuple[str, int]]:
        return sorted(self._by_group.get(group, {}))

    def committed(self, group: str, topics: Iterable[tuple[str, Iterable[int]]] | None
                  ) -> Iterator[tuple[str, int, OffsetCommitValue | None]]:
        """(topic, partition, commit or None) for the partitions asked, or for every committed
        partition of the group when ``topics`` is None (OffsetFetch's "all")."""
        offsets = self._by_group.get(group, {})
        if topics is None:
            for (topic, partition), value in sorted(offsets.items()):
                yield topic, partition, value
            return
        for topic, partitions in topics:
            for partition in partitions:
                yield topic, partition, offsets.get((topic, partition))
