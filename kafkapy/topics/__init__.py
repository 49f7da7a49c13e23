"""Topics: CreateTopics, DeleteTopics and CreatePartitions, with Kafka's placement and errors.

The topics themselves live in the metadata store (/brokers/topics/<topic> on ZooKeeper); every
broker keeps a view of them (``BrokerServices.cluster.topics``) through the store's topics watch,
which Metadata answers from. docs/topics.md describes the module.
"""

from __future__ import annotations

from kafkapy.server.policies import CreateTopicRequest, PolicyViolation
from kafkapy.topics.assignment import assign_replicas, partition_label, placement_for_new_partitions
from kafkapy.topics.module import TopicsModule

__all__ = ["CreateTopicRequest", "PolicyViolation", "TopicsModule", "assign_replicas", "partition_label",
           "placement_for_new_partitions"]
