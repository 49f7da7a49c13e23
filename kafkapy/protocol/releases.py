"""What Apache Kafka releases served: the API version ranges of their ApiVersions answers.

``kafka.version`` (kafkapy.server.config) makes the broker advertise, and serve, what one of these
releases did, clipped to what kafkapy implements, so a client's behaviour against an older (or
newer) broker can be tested without running one.

Where the numbers come from (gathered once, by hand; a test holds the shapes):

* 2.8 and 3.9 are ZooKeeper-mode brokers (kafkapy keeps metadata in ZooKeeper or memory): each
  request spec in Kafka's ``clients/src/main/resources/common/message`` at tags ``2.8.0`` and
  ``3.9.0-rc3`` whose ``listeners`` include ``zkBroker``, ``validVersions`` less a latest version
  marked ``latestVersionUnstable`` (not served by default). The inter-broker-only LeaderAndIsr,
  StopReplica and UpdateMetadata, which kafkapy has no codec for, are left out. These agree,
  key by key, with franz-go's ``pkg/kversion`` tables (``V2_8_0``, ``V3_9_0``).
* 4.0 is a KRaft broker (4.0 has no ZooKeeper mode): franz-go's ``V4_0_0`` (3.9's broker table,
  KIP-896's new minimums, 4.0's bumps), its minimums checked against the "removed in Apache
  Kafka 4.0" notes in Kafka's request specs (as kafka-python ships them).
* Produce v0-v2 in 4.0: removed by KIP-896 but still advertised (KAFKA-18659: librdkafka
  refuses to produce compressed records to a broker that does not list Produce v0), and
  answered with UNSUPPORTED_VERSION, per partition (``REFUSED``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange

__all__ = ["KAFKA_RELEASES", "KafkaRelease", "kafka_release"]


@attrs.frozen
class KafkaRelease:
    """One release: ``advertised`` per key (keys absent were not served), and the versions it
    advertised but refused with UNSUPPORTED_VERSION (``refused``)."""

    name: str
    advertised: Mapping[ApiKey, VersionRange]
    refused: Mapping[ApiKey, VersionRange] = attrs.field(factory=dict)


def _ranges(table: Mapping[ApiKey, tuple[int, int]]) -> dict[ApiKey, VersionRange]:
    return {key: VersionRange(low, high) for key, (low, high) in table.items()}


_2_8: Final[Mapping[ApiKey, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 9), ApiKey.FETCH: (0, 12), ApiKey.LIST_OFFSETS: (0, 6), ApiKey.METADATA: (0, 11),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3), ApiKey.OFFSET_COMMIT: (0, 8), ApiKey.OFFSET_FETCH: (0, 7),
    ApiKey.FIND_COORDINATOR: (0, 3), ApiKey.JOIN_GROUP: (0, 7), ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4), ApiKey.SYNC_GROUP: (0, 5), ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4), ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 7), ApiKey.DELETE_TOPICS: (0, 6), ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4), ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3), ApiKey.ADD_OFFSETS_TO_TXN: (0, 3), ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (0, 1), ApiKey.TXN_OFFSET_COMMIT: (0, 3), ApiKey.DESCRIBE_ACLS: (0, 2),
    ApiKey.CREATE_ACLS: (0, 2), ApiKey.DELETE_ACLS: (0, 2), ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2), ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2), ApiKey.DESCRIBE_LOG_DIRS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2), ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.CREATE_DELEGATION_TOKEN: (0, 2), ApiKey.RENEW_DELEGATION_TOKEN: (0, 2),
    ApiKey.EXPIRE_DELEGATION_TOKEN: (0, 2), ApiKey.DESCRIBE_DELEGATION_TOKEN: (0, 2),
    ApiKey.DELETE_GROUPS: (0, 2), ApiKey.ELECT_LEADERS: (0, 2), ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0), ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0), ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1), ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.ALTER_PARTITION: (0, 0),
    ApiKey.UPDATE_FEATURES: (0, 0), ApiKey.DESCRIBE_CLUSTER: (0, 0), ApiKey.DESCRIBE_PRODUCERS: (0, 0),
}

_3_9: Final[Mapping[ApiKey, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 11), ApiKey.FETCH: (0, 17), ApiKey.LIST_OFFSETS: (0, 9), ApiKey.METADATA: (0, 12),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3), ApiKey.OFFSET_COMMIT: (0, 9), ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6), ApiKey.JOIN_GROUP: (0, 9), ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5), ApiKey.SYNC_GROUP: (0, 5), ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5), ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7), ApiKey.DELETE_TOPICS: (0, 6), ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5), ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5), ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1), ApiKey.TXN_OFFSET_COMMIT: (0, 4), ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3), ApiKey.DELETE_ACLS: (0, 3), ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2), ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2), ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2), ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.CREATE_DELEGATION_TOKEN: (0, 3), ApiKey.RENEW_DELEGATION_TOKEN: (0, 2),
    ApiKey.EXPIRE_DELEGATION_TOKEN: (0, 2), ApiKey.DESCRIBE_DELEGATION_TOKEN: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2), ApiKey.ELECT_LEADERS: (0, 2), ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0), ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0), ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1), ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.UPDATE_FEATURES: (0, 1), ApiKey.ENVELOPE: (0, 0), ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0), ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1), ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 0), ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
}

_4_0: Final[Mapping[ApiKey, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 12), ApiKey.FETCH: (4, 17), ApiKey.LIST_OFFSETS: (1, 10), ApiKey.METADATA: (0, 13),
    ApiKey.OFFSET_COMMIT: (2, 9), ApiKey.OFFSET_FETCH: (1, 9), ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (2, 9), ApiKey.HEARTBEAT: (0, 4), ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5), ApiKey.DESCRIBE_GROUPS: (0, 6), ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.API_VERSIONS: (0, 4), ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6), ApiKey.DELETE_RECORDS: (0, 2), ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4), ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.END_TXN: (0, 5), ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5), ApiKey.DESCRIBE_ACLS: (1, 3), ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3), ApiKey.DESCRIBE_CONFIGS: (1, 4), ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2), ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2), ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.CREATE_DELEGATION_TOKEN: (1, 3), ApiKey.RENEW_DELEGATION_TOKEN: (1, 2),
    ApiKey.EXPIRE_DELEGATION_TOKEN: (1, 2), ApiKey.DESCRIBE_DELEGATION_TOKEN: (1, 3),
    ApiKey.DELETE_GROUPS: (0, 2), ApiKey.ELECT_LEADERS: (0, 2), ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0), ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0), ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1), ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.UPDATE_FEATURES: (0, 2), ApiKey.DESCRIBE_CLUSTER: (0, 2), ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.UNREGISTER_BROKER: (0, 0), ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1), ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1), ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0), ApiKey.LIST_CONFIG_RESOURCES: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0), ApiKey.ADD_RAFT_VOTER: (0, 0),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
}

KAFKA_RELEASES: Final[Mapping[str, KafkaRelease]] = {
    "2.8": KafkaRelease("2.8", _ranges(_2_8)),
    "3.9": KafkaRelease("3.9", _ranges(_3_9)),
    "4.0": KafkaRelease("4.0", _ranges(_4_0), {ApiKey.PRODUCE: VersionRange(0, 2)}),
}


def kafka_release(version: str) -> KafkaRelease:
    """The release ``version`` names: "2.8", "2.8.2" (a patch release serves what its minor
    did) or "4.0.0"; a ValueError naming the known ones otherwise."""
    parts = version.strip().split(".")
    release = KAFKA_RELEASES.get(".".join(parts[:2]))
    if release is None or len(parts) > 3 or not all(part.isdecimal() for part in parts):
        raise ValueError(f"unknown Kafka release {version!r}; kafkapy knows {', '.join(KAFKA_RELEASES)}")
    return release
