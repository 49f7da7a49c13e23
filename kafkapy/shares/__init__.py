"""KIP-932 share groups ("queues for Kafka"): membership, share sessions and share-partitions."""

from kafkapy.shares.module import ShareModule

__all__ = ["ShareModule"]
