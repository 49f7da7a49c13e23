"""A coordinator's state topic (``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``), made on first need as Kafka makes it, and written through the data
plane's partition logs.

Kafka creates these when a FindCoordinator first needs one, through the same checks CreateTopics
makes, and tells the client COORDINATOR_NOT_AVAILABLE meanwhile. Every coordinator module needs
exactly that: one creation try at a time through TOPIC_CREATION, and a wait on the store's watch
(not a poll, so a virtual clock need not move) until this broker's view has the topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.server.modules import Module
from kafkapy.server.services import (
    PARTITION_LOGS,
    TOPIC_CREATION,
    BrokerServices,
    InternalTopicCreation,
    InternalTopicShape,
    PartitionLogs,
    PartitionLogsProvider,
)
from kafkapy.store.onloop import watching

__all__ = ["APPEND_ERRORS", "InternalTopic", "TopicShape"]

TopicShape = InternalTopicShape  # partitions, replication factor, topic configs
VIEW_WAIT_S = 5.0  # how long a creation waits for the new topic to reach this broker's view
# A state record's append error as the coordinator's client sees it (Kafka's
# TransactionStateManager.appendTransactionToLog; the share coordinator answers the same).
APPEND_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


class InternalTopic:
    """One state topic of one module. ``shape`` is read at each try (from the broker's config), and
    registered with the broker, so Metadata's auto-creation of the name makes the same topic."""

    def __init__(self, services: BrokerServices, name: str, shape: Callable[[], TopicShape]) -> None:
        self.services = services
        self.name = name
        self._shape = shape
        services.register_internal_topic(name, shape)
        self._try: asyncio.Task[bool] | None = None
        self._logs: PartitionLogs | None = None  # the data plane's, found on first use

    def request(self) -> asyncio.Task[bool]:
        """Start making the topic unless a try is under way; the try answers whether the topic is
        in this broker's view by its end."""
        if self._try is None or self._try.done():
            self._try = self.services.loop.create_task(self._create())
        return self._try

    async def ensure(self) -> bool:
        """Whether the topic is in this broker's view, made now if need be."""
        if self.name in self.services.cluster.topics:
            return True
        try:
            return await asyncio.shield(self.request())
        except Exception:
            return False

    def partition_logs(self) -> PartitionLogs:
        """The data plane's logs, looked up once: a runtime-checked Protocol's isinstance costs
        more than the append it guards (three state records per transaction; docs/performance.md).
        COORDINATOR_NOT_AVAILABLE without a data plane."""
        if self._logs is None:
            source = self.services.provider(PARTITION_LOGS, Module)
            if not isinstance(source, PartitionLogsProvider):
                raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                    "no data plane serves partition logs")
            self._logs = source.partition_logs()
        return self._logs

    def cancel(self) -> None:
        if self._try is not None:
            self._try.cancel()

    async def _create(self) -> bool:
        creation = self.services.provider(TOPIC_CREATION, Module)
        if not isinstance(creation, InternalTopicCreation):
            self.services.log.warning("cannot create %s: no module offers internal topic creation", self.name)
            return False
        partitions, replication_factor, configs = self._shape()
        code = await creation.create_internal_topic(self.name, partitions, replication_factor, configs)
        if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            self.services.log.warning("cannot create %s: %s", self.name, code.name)
            return False
        if self.name in self.services.cluster.topics:
            return True
        async with watching(self.services.loop, self.services.store.watch_topics) as topics:
            return await topics.wait_for(lambda view: self.name in view, VIEW_WAIT_S)
