"""Which topics the cluster view lost: what a coordinator needs to forget state of deleted topics.

Kafka tells its group coordinator of deleted partitions (``onPartitionsDeleted``, from the
metadata publisher in KRaft, from StopReplica with ``deletePartitions`` on ZooKeeper), and the
coordinator drops the committed offsets of those partitions. kafkapy's brokers learn of a
deletion from their cluster view instead, so this follows the view and names the topics that
went since the last look. A topic is known by its id: one deleted and made again under the same
name between two looks is still a deletion.

The view calls back on the thread that changed it; the look runs on the broker's loop, at most
one queued however many changes come first, as ``CoordinatorElections`` does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping

from kafkapy.server.services import ClusterView
from kafkapy.store.base import TopicInfo
from kafkapy.store.onloop import call_soon_on

__all__ = ["TopicDeletions"]


def _ids(topics: Mapping[str, TopicInfo]) -> dict[str, uuid.UUID]:
    return {name: info.topic_id for name, info in topics.items()}


class TopicDeletions:
    """Calls ``deleted(names)`` on the loop with the topics the view lost since the last call."""

    def __init__(self, cluster: ClusterView, deleted: Callable[[frozenset[str]], None]) -> None:
        self.cluster = cluster
        self.deleted = deleted
        self._known: dict[str, uuid.UUID] = {}
        self._seen: object = None  # the topics snapshot the last look read: the same is skipped
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = False
        self._remove: Callable[[], None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow the view from now on: the topics it holds now are the ones known."""
        self._loop = loop
        self._seen = self.cluster.topics
        self._known = _ids(self.cluster.topics)
        self._remove = self.cluster.on_change(self._changed)

    def stop(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None
        self._loop = None

    def _changed(self) -> None:
        """From any thread: one look soon."""
        loop = self._loop
        if loop is None or self._pending:
            return
        self._pending = True
        if not call_soon_on(loop, self._look):
            self._pending = False

    def _look(self) -> None:
        self._pending = False
        topics = self.cluster.topics
        if self._loop is None or topics is self._seen:
            return
        self._seen = topics
        now = _ids(topics)
        gone = frozenset(name for name, topic_id in self._known.items() if now.get(name) != topic_id)
        self._known = now
        if gone:
            self.deleted(gone)
