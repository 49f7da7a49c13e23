"""Log dirs written before kafkapy kept its metadata: their topics adopted on the store's first start.

A kafkapy before the durable store (kafkapy.store.durable) kept its topics in memory and its
records under ``log.dirs``; each partition directory's ``partition.metadata`` holds its topic id.
Started over such dirs with a store that holds nothing yet, a broker would have no topics, and a
topic made again (a new id) would find every old log holding another id and refuse it. So the
topics are made from the dirs first, through the store's own topic creation, before any module
starts and before a client is served:

* the topic id is the one the partitions' ``partition.metadata`` hold; with none (a log older
  than KIP-516's ids) a new one, which the data plane writes into each log as Kafka writes
  partition.metadata once it learns the id; partitions holding different ids: left, with a warning;
* the partition count is the highest partition found + 1. A partition that was never written has
  no directory (logs are made on first use), so those at the end are not known, and a gap is made
  again empty, on the brokers of the topic's first partition found. A coordinator's state topic
  (``__consumer_offsets``, ...) has at least the count its module makes it with, as the
  coordinator maps its ids over that count;
* the replicas are the brokers whose dirs hold the partition, the one with the most bytes of
  records first (the preferred leader: an in-process cluster's partition lives on the broker
  that led it);
* configs: Kafka's defaults (overrides were never kept), but a state topic takes its module's.

Names Kafka refuses are left (the log loading opens those logs, which no topic ever serves).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from kafkapy.log.partition_metadata import kafka_uuid
from kafkapy.log.survey import FoundPartition, survey_log_dirs
from kafkapy.server.services import InternalTopicShape
from kafkapy.store.base import StoreError, TopicAlreadyExists, TopicInfo, TopicStore, topic_name_problem

__all__ = ["adopt_log_dirs"]

log = logging.getLogger(__name__)
# A topic made from its dirs has partitions 0 to the highest found, gaps made again: a stray
# directory such as ``orders-2000000000`` must not make two billion. A KRaft controller makes at
# most 10,000 records for one request (QuorumController.MAX_RECORDS_PER_USER_OP): a topic record
# and one per partition, so no topic Kafka creates at once has more partitions than this.
MAX_PARTITIONS = 10_000 - 1


def adopt_log_dirs(store: TopicStore, log_dirs: Mapping[int, Sequence[str]], cluster_id: str,
                   internal_topics: Mapping[str, Callable[[], InternalTopicShape]]) -> list[TopicInfo]:
    """Make the topics of each broker's ``log_dirs`` (broker id -> its dirs) in ``store``; answers
    those made. MetaPropertiesMismatch (before anything is made) for a dir of another broker or
    cluster, as the log loading refuses it."""
    holders: dict[str, list[tuple[int, FoundPartition]]] = {}
    left: list[str] = []
    for broker_id, dirs in sorted(log_dirs.items()):
        survey = survey_log_dirs(dirs, broker_id, cluster_id)
        left += survey.left
        for partition in survey.partitions:
            holders.setdefault(partition.topic, []).append((broker_id, partition))
    made: list[TopicInfo] = []
    for topic, found in sorted(holders.items()):
        why = _why_left(topic, found)
        if why is not None:
            left.append(why)
            continue
        shape = None if topic not in internal_topics else internal_topics[topic]()
        partitions = _assignment(found, 0 if shape is None else shape[0])
        topic_id = next((f.topic_id for _, f in found if f.topic_id is not None), None)
        try:
            info = store.create_topic(topic, partitions, topic_id, None if shape is None else shape[2])
        except TopicAlreadyExists:
            continue
        except StoreError as exc:
            left.append(f"topic {topic}: {exc}")
            continue
        made.append(info)
        log.info("Adopted topic %s from its logs: id %s%s, partition count %d, on brokers %s", topic,
                 kafka_uuid(info.topic_id), "" if topic_id else " (new: its logs held none)",
                 len(partitions), sorted({b for b, _ in found}))
    if made or left:
        log.warning("%d topics adopted from log dirs without kafkapy's metadata files (an older kafkapy's): "
                    "their config overrides were not kept, so they have the defaults (the coordinators' "
                    "topics their modules' configs)%s", len(made), "".join(f"; left: {why}" for why in left))
    return made


def _why_left(topic: str, found: list[tuple[int, FoundPartition]]) -> str | None:
    problem = topic_name_problem(topic)
    if problem is not None:
        return f"{', '.join(str(f.directory) for _, f in found)}: Topic name is invalid: {problem}"
    highest = max(f.partition for _, f in found)
    if highest >= MAX_PARTITIONS:
        return (f"topic {topic}: its partition {highest} would make more than {MAX_PARTITIONS} partitions "
                f"(Kafka's controller makes no more at once)")
    ids = sorted({kafka_uuid(f.topic_id) for _, f in found if f.topic_id is not None})
    if len(ids) > 1:
        return f"topic {topic}: its partitions hold different topic ids ({', '.join(ids)})"
    return None


def _assignment(found: list[tuple[int, FoundPartition]], least: int) -> dict[int, tuple[int, ...]]:
    """Each partition's replicas: the brokers holding it, the most bytes first; a partition none
    holds (below the highest found, or below ``least``) on the brokers of the first found."""
    copies: dict[int, list[tuple[int, int]]] = {}
    for broker_id, f in found:
        copies.setdefault(f.partition, []).append((-f.log_bytes, broker_id))
    replicas = {p: tuple(broker for _, broker in sorted(held)) for p, held in copies.items()}
    first = replicas[min(replicas)]
    return {p: replicas.get(p, first) for p in range(max(max(replicas) + 1, least))}
