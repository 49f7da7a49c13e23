"""Making an internal topic as Kafka does on first need: its own partition count, a replication
factor capped at the live brokers, and fixed configs (compaction), straight through the store."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kafkapy.server.services import BrokerServices
from kafkapy.store.base import StoreError, TopicAlreadyExists
from kafkapy.topics.assignment import assign_replicas

__all__ = ["create_internal_topic"]


async def create_internal_topic(services: BrokerServices, name: str, partitions: int, replication_factor: int,
                                config: Mapping[str, str]) -> None:
    """Create ``name`` unless it exists; a failure is logged, and the next FindCoordinator tries again
    (the client is answered COORDINATOR_NOT_AVAILABLE meanwhile, as by Kafka)."""
    live = sorted(broker.broker_id for broker in services.cluster.brokers)
    if not live:
        return
    # Kafka caps an internal topic's replication factor at the live brokers when it makes it.
    assignment = assign_replicas(live, partitions, min(replication_factor, len(live)))
    try:
        await asyncio.to_thread(services.store.create_topic, name, assignment, None, dict(config))
    except TopicAlreadyExists:
        return
    except StoreError as exc:
        services.log.warning("could not create %s: %s", name, exc)
        return
    services.log.info("created %s with %d partitions", name, partitions)
