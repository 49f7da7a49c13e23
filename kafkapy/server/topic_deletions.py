"""Which topics the cluster view lost: what a coordinator needs to forget state of deleted topics.

Kafka tells its group coordinator of deleted partitions (``onPartitionsDeleted``, from the
metadata publisher in KRaft, from StopReplica with ``deletePartitions`` on ZooKeeper), and the
coordinator drops the committed offsets of those partitions. kafkapy's brokers learn of a
deletion from their cluster view instead, so this follows the view and names the topics that
went since the last look. A topic is known by its id: one deleted and made again under the same
name between two looks is still a deletion. The view's topics are snapshots of one lineage
(kafkapy.store.base), so a look compares the last one with today's by ``changed_keys``, in time
proportional to the change: comparing every topic made creating N topics O(N^2).

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
from kafkapy.store.persistent import PersistentMap, changed_keys

__all__ = ["TopicDeletions"]


class TopicDeletions:
    """Calls ``deleted(topics)`` on the loop with the topics the view lost since the last call, each
    name with the id it had (a log keeps it: the data plane drops only the logs of that id)."""

    def __init__(self, cluster: ClusterView, deleted: Callable[[Mapping[str, uuid.UUID]], None]) -> None:
        self.cluster = cluster
        self.deleted = deleted
        self._seen: Mapping[str, TopicInfo] = PersistentMap()  # the topics the last look read
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = False
        self._remove: Callable[[], None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow the view from now on: the topics it holds now are the ones known."""
        self._loop = loop
        self._seen = self.cluster.topics
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
        topics, seen = self.cluster.topics, self._seen
        if self._loop is None or topics is seen:
            return
        self._seen = topics
        gone = {name: seen[name].topic_id for name in changed_keys(seen, topics) if name in seen
                and (name not in topics or topics[name].topic_id != seen[name].topic_id)}
        if gone:
            self.deleted(gone)
