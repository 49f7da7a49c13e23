"""Cluster metadata stores: in memory by default, ZooKeeper (kazoo) when zookeeper.connect is set."""

from typing import TYPE_CHECKING, Any

from kafkapy.store.base import (
    AclResource,
    AclStore,
    AclVersionConflict,
    BrokerRegistration,
    BrokerStore,
    ConfigStore,
    CoordinatorStore,
    CorruptMetadata,
    FeatureEpochConflict,
    FeatureStore,
    LogDirEventQueue,
    LogDirStore,
    MetadataStore,
    PartitionState,
    PartitionStateConflict,
    PartitionStateStore,
    ProducerIdBlock,
    ProducerIdStore,
    RegisteredEndpoint,
    StoredAcl,
    StoreError,
    StoreLifecycle,
    TopicAlreadyExists,
    TopicInfo,
    TopicStore,
    UnknownTopic,
    Watch,
    new_cluster_id,
)
from kafkapy.store.memory import MemoryStore

if TYPE_CHECKING:
    from kafkapy.store.zookeeper import ZooKeeperStore

__all__ = [
    "AclResource",
    "AclStore",
    "AclVersionConflict",
    "BrokerRegistration",
    "BrokerStore",
    "ConfigStore",
    "CoordinatorStore",
    "CorruptMetadata",
    "FeatureEpochConflict",
    "FeatureStore",
    "LogDirEventQueue",
    "LogDirStore",
    "MemoryStore",
    "MetadataStore",
    "PartitionState",
    "PartitionStateConflict",
    "PartitionStateStore",
    "ProducerIdBlock",
    "ProducerIdStore",
    "RegisteredEndpoint",
    "StoreError",
    "StoreLifecycle",
    "StoredAcl",
    "TopicAlreadyExists",
    "TopicInfo",
    "TopicStore",
    "UnknownTopic",
    "Watch",
    "ZooKeeperStore",
    "new_cluster_id",
]


def __getattr__(name: str) -> Any:
    # kazoo is imported only by those who use ZooKeeper.
    if name == "ZooKeeperStore":
        from kafkapy.store.zookeeper import ZooKeeperStore

        return ZooKeeperStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
