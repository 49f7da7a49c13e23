"""What a real client sees of a partition's leadership, for the leadership tests of several
directories (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

__all__ = ["metadata_leader"]


def metadata_leader(bootstrap: str, topic: str, timeout_s: float = 20.0) -> tuple[int, int]:
    """(leader, leader epoch) of partition 0 as a client's Metadata shows it (kafka-python's
    admin client)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000))
    try:
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    [partition] = described["partitions"]
    return partition["leader_id"], partition["leader_epoch"]
