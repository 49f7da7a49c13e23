"""Cluster metadata stores: in memory by default (ZooKeeper comes with the metadata issue)."""

from kafkapy.store.memory import BrokerRegistration, MemoryStore, RegisteredEndpoint, new_cluster_id

__all__ = ["BrokerRegistration", "MemoryStore", "RegisteredEndpoint", "new_cluster_id"]
