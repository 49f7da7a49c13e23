"""kafka-python group consumers for the suite's tests: one polled on a thread of its own, and the
workaround for a kafka-python 3.0.x group bug that every such loop needs (tests/ is on sys.path
through its conftest)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from kafkapy.testing import wait_until

__all__ = ["PolledMember", "close_all", "keep_pending_join_needed", "poll_once", "poll_until_assigned",
           "subscribe_when_seen"]

JOIN_TIMEOUT_S = 30.0


def keep_pending_join_needed(coordinator: Any) -> None:
    """Work around a kafka-python 3.0.x bug that strands a rejoin the leader starts itself.

    A poll(timeout_ms) whose timer runs out during a JoinGroup -> SyncGroup round leaves the round
    in flight (``coordinator._join_task``) for the next poll to await; but the next poll awaits it
    only if ``need_rejoin()`` still holds. For a rejoin the leader starts itself (its topic
    metadata changed since it assigned) that is the metadata-snapshot check alone: it does not set
    ``rejoin_needed``, and once the round has run the assignor the snapshots match again. So when
    the SyncGroup answer comes after the poll gave up, no poll ever awaits the round: the member
    stays REBALANCING with heartbeats off (switched off before the JoinGroup, on again only when a
    poll completes the round), never applies its assignment, and its session runs out; its
    LeaveGroup at close then gets UNKNOWN_MEMBER_ID. Kafka's Java consumer has no such hole: its
    rejoinNeededOrPending() is ``rejoinNeeded || joinFuture != null``, and its metadata check sets
    rejoinNeeded. This does the same: while a round is in flight the rejoin stays needed (kafka-python
    clears the flag itself when the round completes)."""
    if getattr(coordinator, "_join_task", None) is not None:
        coordinator.request_rejoin()


class PolledMember:
    """A kafka-python group consumer polled on a thread of its own: it records what it reads
    (``decode``d) and the partitions it owns, and commits after every poll that brought records; a
    failed commit (a rebalance under way) is counted, and the next poll's commit covers it."""

    def __init__(self, consumer: Any, decode: Callable[[bytes], Any] = bytes) -> None:
        self.consumer = consumer
        self.decode = decode
        self.seen: list[Any] = []
        self.parts: set[int] = set()
        self.failed_commits = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from kafka.errors import KafkaError

        while not self.stop.is_set():
            batches = self.consumer.poll(100)
            keep_pending_join_needed(self.consumer._coordinator)
            for records in batches.values():
                self.seen.extend(self.decode(r.value) for r in records)
            if batches:
                try:
                    self.consumer.commit()
                except KafkaError:
                    self.failed_commits += 1
            self.parts = {tp.partition for tp in self.consumer.assignment()}
        self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(JOIN_TIMEOUT_S)


def close_all(members: Iterable[PolledMember]) -> None:
    """Close several members at once: each loop ends after its current poll (up to 100 ms with
    nothing to read), so they are all told first and those polls run out together."""
    members = list(members)
    for member in members:
        member.stop.set()
    for member in members:
        member.close()


def subscribe_when_seen(consumer: Any, topic: str, timeout: float = JOIN_TIMEOUT_S) -> None:
    """Subscribe once the consumer's metadata has ``topic``: joining without it, kafka-python's
    leader assigns nothing and rejoins on its own, the round the bug above can strand."""
    wait_until(lambda: topic in consumer.topics(), timeout, what=f"the consumer to see {topic}")
    consumer.subscribe([topic])


def poll_once(consumer: Any) -> None:
    """One short poll, with the workaround after it."""
    consumer.poll(100)
    keep_pending_join_needed(consumer._coordinator)


def poll_until_assigned(consumer: Any, partitions: int, timeout: float = JOIN_TIMEOUT_S) -> None:
    def assigned() -> bool:
        poll_once(consumer)
        return len(consumer.assignment()) == partitions
    wait_until(assigned, timeout, what=f"the consumer's assignment of {partitions} partitions")
