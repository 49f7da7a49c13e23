"""The changes of the cluster state that outlive a session, as values.

The in-memory store (kafkapy.store.memory) makes every lasting change by building one of these and
applying it, so its durable form (kafkapy.store.durable) can write the same value to its journal
first and apply it again on replay: one way to change the state, live or replayed. Each holds the
state a key has after the change (not the operation that led to it), so replaying one twice does
no harm.

What is not here stays ephemeral, as it is in a ZooKeeper session or a KRaft broker's heartbeat:
broker registrations, the controller and coordinator elections, the KIP-112 offline replicas.

``to_json`` and ``from_json`` give each change a JSON object, ``{"change": <kind>, ...}``, with
Kafka's spellings where it has them (topic ids in its base64, ACL names in Pascal case).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import attrs

from kafkapy.store.base import (
    AclResource,
    PartitionState,
    ProducerIdBlock,
    StoredAcl,
    StoreError,
    TopicInfo,
    decode_uuid,
    encode_uuid,
)

__all__ = ["AclsWritten", "BrokerSequence", "Change", "ConfigWritten", "FeaturesWritten", "MembersWritten",
           "OffsetsCommitted", "OwnersWritten", "PartitionStateWritten", "ProducerIdsAllocated",
           "TopicDeleted", "TopicWritten", "from_json", "to_json"]

TopicPartition = tuple[str, int]


@attrs.frozen
class BrokerSequence:
    """The next id ``allocate_broker_id`` may hand out (ZooKeeper's /brokers/seqid)."""

    next_id: int


@attrs.frozen
class ConfigWritten:
    """An entity's config replaced (empty: removed)."""

    entity_path: str
    config: Mapping[str, str]


@attrs.frozen
class FeaturesWritten:
    epoch: int
    features: Mapping[str, int]


@attrs.frozen
class TopicWritten:
    """A topic made or its partitions changed. ``config``: the overrides a creation writes with it
    (``{}`` for none); None when the topic keeps the ones it has."""

    info: TopicInfo
    config: Mapping[str, str] | None


@attrs.frozen
class TopicDeleted:
    """The topic gone, with its config overrides and its partitions' states."""

    name: str


@attrs.frozen
class OwnersWritten:
    group: str
    owners: Mapping[TopicPartition, str]


@attrs.frozen
class MembersWritten:
    group: str
    members: Mapping[str, int]


@attrs.frozen
class OffsetsCommitted:
    """Offsets merged into the group's (the others it has stay)."""

    group: str
    offsets: Mapping[TopicPartition, int]


@attrs.frozen
class ProducerIdsAllocated:
    block: ProducerIdBlock


@attrs.frozen
class PartitionStateWritten:
    topic: str
    partition: int
    state: PartitionState


@attrs.frozen
class AclsWritten:
    """A resource's ACLs replaced at ``version`` (none: the resource has none left)."""

    resource: AclResource
    acls: frozenset[StoredAcl]
    version: int


Change: TypeAlias = (BrokerSequence | ConfigWritten | FeaturesWritten | TopicWritten | TopicDeleted
                     | OwnersWritten | MembersWritten | OffsetsCommitted | ProducerIdsAllocated
                     | PartitionStateWritten | AclsWritten)


def _pairs(mapping: Mapping[TopicPartition, Any]) -> list[list[Any]]:
    return [[topic, partition, value] for (topic, partition), value in sorted(mapping.items())]


def _unpairs(rows: list[list[Any]], kind: Callable[[Any], Any]) -> dict[TopicPartition, Any]:
    return {(str(topic), int(partition)): kind(value) for topic, partition, value in rows}


def _topic_json(info: TopicInfo) -> dict[str, Any]:
    return {"name": info.name, "id": encode_uuid(info.topic_id),
            "partitions": [[index, list(replicas)] for index, replicas in sorted(info.partitions.items())]}


def _topic_from(obj: dict[str, Any]) -> TopicInfo:
    return TopicInfo(str(obj["name"]), decode_uuid(str(obj["id"])),
                     {int(index): tuple(int(r) for r in replicas) for index, replicas in obj["partitions"]})


def _state_json(state: PartitionState) -> dict[str, Any]:
    return {"leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr),
            "controller_epoch": state.controller_epoch, "partition_epoch": state.partition_epoch}


def _state_from(obj: dict[str, Any]) -> PartitionState:
    return PartitionState(int(obj["leader"]), int(obj["leader_epoch"]), tuple(int(b) for b in obj["isr"]),
                          int(obj["controller_epoch"]), int(obj["partition_epoch"]))


def to_json(change: Change) -> dict[str, Any]:
    """The change as a JSON object (``from_json`` reads it back equal)."""
    match change:
        case BrokerSequence(next_id):
            return {"change": "broker_sequence", "next_id": next_id}
        case ConfigWritten(path, config):
            return {"change": "config", "entity": path, "config": dict(config)}
        case FeaturesWritten(epoch, features):
            return {"change": "features", "epoch": epoch, "features": dict(features)}
        case TopicWritten(info, config):
            return {"change": "topic", **_topic_json(info),
                    "config": None if config is None else dict(config)}
        case TopicDeleted(name):
            return {"change": "topic_deleted", "name": name}
        case OwnersWritten(group, owners):
            return {"change": "owners", "group": group, "owners": _pairs(owners)}
        case MembersWritten(group, members):
            return {"change": "members", "group": group, "members": dict(members)}
        case OffsetsCommitted(group, offsets):
            return {"change": "offsets", "group": group, "offsets": _pairs(offsets)}
        case ProducerIdsAllocated(block):
            return {"change": "producer_ids", "broker": block.broker_id, "first_id": block.first_id,
                    "size": block.size}
        case PartitionStateWritten(topic, partition, state):
            return {"change": "partition_state", "topic": topic, "partition": partition, **_state_json(state)}
        case AclsWritten(resource, acls, version):
            return {"change": "acls",
                    "resource": [resource.pattern_type, resource.resource_type, resource.name],
                    "acls": sorted([a.principal, a.permission_type, a.operation, a.host] for a in acls),
                    "version": version}
    raise TypeError(f"not a store change: {change!r}")


def _decode(obj: dict[str, Any]) -> Change:
    match obj["change"]:
        case "broker_sequence":
            return BrokerSequence(int(obj["next_id"]))
        case "config":
            return ConfigWritten(str(obj["entity"]), {str(k): str(v) for k, v in obj["config"].items()})
        case "features":
            return FeaturesWritten(int(obj["epoch"]), {str(k): int(v) for k, v in obj["features"].items()})
        case "topic":
            config = obj["config"]
            return TopicWritten(_topic_from(obj),
                                None if config is None else {str(k): str(v) for k, v in config.items()})
        case "topic_deleted":
            return TopicDeleted(str(obj["name"]))
        case "owners":
            return OwnersWritten(str(obj["group"]), _unpairs(obj["owners"], str))
        case "members":
            return MembersWritten(str(obj["group"]), {str(k): int(v) for k, v in obj["members"].items()})
        case "offsets":
            return OffsetsCommitted(str(obj["group"]), _unpairs(obj["offsets"], int))
        case "producer_ids":
            return ProducerIdsAllocated(ProducerIdBlock(int(obj["broker"]), int(obj["first_id"]),
                                                        int(obj["size"])))
        case "partition_state":
            return PartitionStateWritten(str(obj["topic"]), int(obj["partition"]), _state_from(obj))
        case "acls":
            pattern, kind, name = (str(part) for part in obj["resource"])
            return AclsWritten(AclResource(pattern, kind, name),
                               frozenset(StoredAcl(*(str(f) for f in acl)) for acl in obj["acls"]),
                               int(obj["version"]))
    raise ValueError(f"unknown change {obj['change']!r}")


def from_json(obj: object) -> Change:
    """The change ``to_json`` wrote; StoreError naming what is wrong for anything else."""
    if not isinstance(obj, dict) or "change" not in obj:
        raise StoreError(f"not a store change: {str(obj)[:80]!r}")
    try:
        return _decode(obj)
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"unreadable {obj.get('change')!r} change: {exc!r}") from None
