"""Kafka's znodes: the paths and the JSON each holds, as Kafka's ZkData writes and reads them.

Sans I/O: ``kafkapy.store.zookeeper`` does the reads, writes and watches. A decoder raises
CorruptMetadata naming the path for anything Kafka would not have written, so one bad znode
is one clear error (``tests/store/test_znode_fuzz.py``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from kafkapy.store.base import (
    AclResource,
    BrokerRegistration,
    CorruptMetadata,
    PartitionState,
    ProducerIdBlock,
    RegisteredEndpoint,
    StoredAcl,
    TopicInfo,
    decode_uuid,
    encode_uuid,
)

__all__ = [
    "ACL_CHANGE_PREFIX", "BROKER_IDS", "BROKER_SEQID", "CHANGE_EXPIRATION_S", "CHANGE_PREFIX",
    "CLUSTER_ID", "CONFIG", "CONFIG_CHANGES", "CONSUMERS", "CONTROLLER", "COORDINATOR",
    "EXTENDED_ACLS", "EXTENDED_ACL_CHANGES", "FEATURE", "LITERAL_ACLS", "LITERAL_ACL_CHANGES",
    "LOG_DIR_EVENTS", "LOG_DIR_EVENT_PREFIX", "OFFLINE_REPLICAS", "PRODUCER_ID_BLOCK", "TOPICS",
    "TOPIC_CONFIGS", "ZERO_UUID", "acl_change", "acl_path", "acl_root", "decode_broker",
    "decode_offline_replicas", "decode_partition_state", "decode_producer_id_block", "decode_topic",
    "dumps", "encode_acls", "encode_broker", "encode_log_dir_event", "encode_offline_replicas",
    "encode_partition_state", "encode_producer_id_block", "encode_topic", "group_id_problem", "now_ms",
    "partition_state_path", "pascal_case",
]

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
FEATURE = "/feature"
CONFIG = "/config"
TOPIC_CONFIGS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
CHANGE_EXPIRATION_S = 15 * 60
CONSUMERS = "/consumers"
COORDINATOR = "/consumers/coordinator"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# Kafka's ACL tree (ZkData's ZkAclStore): LITERAL patterns under /kafka-acl, the others under
# /kafka-acl-extended/<pattern type, lower case>; a change notification queue for each.
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"

ZERO_UUID = uuid.UUID(int=0)
# Kafka's LogDirEventNotificationZNode: a broker whose log dir failed adds a sequential child for
# the controller (LogDirEventNotificationSequenceZNode, {"version":1,"broker":<id>,"event":1}).
LOG_DIR_EVENTS = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # LogDirEventNotificationHandler.LogDirFailureEvent
# kafkapy's own: which replicas each broker holds in a failed dir (Kafka's controller asks the
# broker instead, with LeaderAndIsr); one child per broker id.
OFFLINE_REPLICAS = "/kafkapy/offline_replicas"


# /consumers/<name> children that are not groups: a group of that name would share the znode.
_RESERVED_GROUPS = frozenset({COORDINATOR.rpartition("/")[2]})


def _znode_refused(char: str) -> bool:
    """Characters ZooKeeper refuses in a path (its PathUtils.validatePath, on Java's UTF-16 code
    units: a character beyond U+FFFF is a surrogate pair there, refused too)."""
    code = ord(char)
    return (code <= 0x1F or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xF8FF
            or 0xFFF0 <= code)


def group_id_problem(group_id: str) -> str | None:
    """Why ``group_id`` cannot name /consumers/<group_id> (None when it can).

    The group id is a znode name under /consumers, used as it is (as the seed-001 coordinator
    and OffsetCommit/OffsetFetch v0 have it). A ``/`` would nest it (``a/b`` lands inside group
    ``a``, and a reader of /consumers sees ``a``, never ``a/b``); empty, ``.`` and ``..`` are
    refused by ZooKeeper, as are its control and reserved characters; and ``coordinator`` is the
    seed-001 election node (ephemeral: it can have no children). Checked by the callers whatever
    the store, so a memory-store cluster refuses what a ZooKeeper one would have to.
    """
    if not group_id:
        return "empty"
    if group_id in _RESERVED_GROUPS:
        return f"{group_id!r} is reserved (/consumers/{group_id})"
    if group_id in (".", ".."):
        return f"{group_id!r} is a relative path"
    if "/" in group_id:
        return "contains '/'"
    bad = next((c for c in group_id if _znode_refused(c)), None)
    if bad is not None:
        return f"contains {bad!r}, which ZooKeeper refuses in a path"
    return None


def dumps(obj: Any) -> bytes:
    """Compact JSON, as Kafka's Json.encodeAsBytes writes it."""
    return json.dumps(obj, separators=(",", ":")).encode()


def now_ms() -> str:
    """Epoch milliseconds as Kafka's timestamps in znodes: a decimal string."""
    return str(int(time.time() * 1000))


def encode_broker(registration: BrokerRegistration) -> dict[str, Any]:
    """BrokerIdZNode version 5; host/port are the PLAINTEXT endpoint's (null/-1 without one).
    User tags ride along under "kafkapy_tags" only when there are some; Kafka ignores the key."""
    plaintext = next((e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None)
    extra = {"kafkapy_tags": dict(registration.tags)} if registration.tags else {}
    return {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "jmx_port": -1,
        "timestamp": now_ms(),
        "endpoints": [f"{e.listener}://{_host(e.host)}:{e.port}" for e in registration.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in registration.endpoints},
        "rack": registration.rack,
        "features": {name: {"min_version": lo, "max_version": hi}
                     for name, (lo, hi) in registration.features.items()},
        **extra,
    }


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def decode_broker(broker_id: int, obj: Mapping[str, Any], path: str) -> BrokerRegistration:
    version = obj.get("version")
    if version not in (1, 2, 3, 4, 5) or isinstance(version, bool):
        raise CorruptMetadata(path, f"unknown version {version!r} (known: 1 to 5)")
    try:
        endpoints: tuple[RegisteredEndpoint, ...]
        if version == 1:
            endpoints = (RegisteredEndpoint("PLAINTEXT", "PLAINTEXT", str(obj["host"]), int(obj["port"])),)
        else:
            protocols = obj.get("listener_security_protocol_map") or {}
            parsed = []
            for text in obj["endpoints"]:
                listener, _, address = str(text).partition("://")
                host, _, port = address.rpartition(":")
                parsed.append(RegisteredEndpoint(listener, str(protocols.get(listener, listener)),
                                                 host.strip("[]"), int(port)))
            endpoints = tuple(parsed)
        rack = obj.get("rack")
        features = {str(name): (int(levels["min_version"]), int(levels["max_version"]))
                    for name, levels in (obj.get("features") or {}).items()}
        tags = {str(k): str(v) for k, v in (obj.get("kafkapy_tags") or {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptMetadata(path, f"malformed broker registration ({type(exc).__name__}: {exc})") from None
    return BrokerRegistration(broker_id, endpoints, None if rack is None else str(rack), features, tags)


def acl_root(pattern_type: str) -> str:
    return LITERAL_ACLS if pattern_type == "LITERAL" else f"{EXTENDED_ACLS}/{pattern_type.lower()}"


def acl_path(resource: AclResource) -> str:
    """``/kafka-acl/Topic/orders``, ``/kafka-acl-extended/prefixed/Group/app-``."""
    return f"{acl_root(resource.pattern_type)}/{resource.resource_type}/{resource.name}"


def encode_acls(acls: frozenset[StoredAcl]) -> bytes:
    """Kafka's AclEntry JSON: ``{"version":1,"acls":[{"principal":..,"permissionType":"Allow",
    "operation":"Read","host":"*"}]}`` (sorted, so equal sets give equal bytes)."""
    ordered = sorted(acls, key=lambda a: (a.principal, a.permission_type, a.operation, a.host))
    return dumps({"version": 1, "acls": [{"principal": a.principal, "permissionType": a.permission_type,
                                            "operation": a.operation, "host": a.host} for a in ordered]})


def _enum_name(pascal: str) -> str:
    """``TransactionalId`` -> ``TRANSACTIONAL_ID``: Java's enum name, which Kafka's notifications carry."""
    return "".join(f"_{ch}" if ch.isupper() and i else ch for i, ch in enumerate(pascal)).upper()


def pascal_case(name: str) -> str:
    """``TRANSACTIONAL_ID`` (or an old Kafka's ``TransactionalId``) -> ``TransactionalId``."""
    if not name.isupper():
        return name
    return "".join(part.capitalize() for part in name.split("_"))


def acl_change(resource: AclResource) -> tuple[str, bytes]:
    """The notification queue and the notification Kafka writes for a change of ``resource``:
    ``TOPIC:orders`` for a LITERAL pattern (LiteralAclChangeStore), an ExtendedAclChangeEvent's JSON
    for the others."""
    if resource.pattern_type == "LITERAL":
        return LITERAL_ACL_CHANGES, f"{_enum_name(resource.resource_type)}:{resource.name}".encode()
    return EXTENDED_ACL_CHANGES, dumps({"version": 1, "resourceType": _enum_name(resource.resource_type),
                                         "name": resource.name, "patternType": resource.pattern_type})


def encode_topic(info: TopicInfo) -> dict[str, Any]:
    """TopicZNode version 3 (with topic_id)."""
    return {
        "version": 3,
        "partitions": {str(p): list(replicas) for p, replicas in sorted(info.partitions.items())},
        "topic_id": encode_uuid(info.topic_id),
        "adding_replicas": {},
        "removing_replicas": {},
    }


def decode_topic(name: str, obj: Mapping[str, Any], path: str) -> TopicInfo:
    version = obj.get("version")
    if version not in (1, 2, 3) or isinstance(version, bool):
        raise CorruptMetadata(path, f"unknown version {version!r} (known: 1 to 3)")
    try:
        partitions = {int(p): tuple(int(r) for r in replicas) for p, replicas in obj["partitions"].items()}
        topic_id = decode_uuid(obj["topic_id"]) if obj.get("topic_id") else ZERO_UUID
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptMetadata(path, f"malformed topic ({type(exc).__name__}: {exc})") from None
    return TopicInfo(name, topic_id, dict(sorted(partitions.items())))


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def encode_partition_state(state: PartitionState) -> dict[str, Any]:
    """TopicPartitionStateZNode version 1, Kafka's JSON (the partition epoch is the znode version)."""
    return {"controller_epoch": state.controller_epoch, "leader": state.leader, "version": 1,
            "leader_epoch": state.leader_epoch, "isr": list(state.isr)}


def decode_partition_state(obj: Mapping[str, Any], path: str, version: int) -> PartitionState:
    """Versions 1 and 2 (2 adds leader_recovery_state, which a leader without replication ignores)."""
    if obj.get("version") not in (1, 2) or isinstance(obj.get("version"), bool):
        raise CorruptMetadata(path, f"unknown version {obj.get('version')!r} (known: 1, 2)")
    try:
        leader, epoch, controller_epoch = obj["leader"], obj["leader_epoch"], obj["controller_epoch"]
        isr = tuple(obj["isr"])
    except (KeyError, TypeError) as exc:
        raise CorruptMetadata(path, f"malformed partition state ({type(exc).__name__}: {exc})") from None
    numbers = (leader, epoch, controller_epoch, *isr)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in numbers):
        raise CorruptMetadata(path, "malformed partition state (leader, leader_epoch, controller_epoch and "
                                    "isr must be integers)")
    return PartitionState(leader, epoch, isr, controller_epoch, version)


def encode_producer_id_block(block: ProducerIdBlock) -> dict[str, Any]:
    """ProducerIdBlockZNode version 1; Kafka writes the ids as decimal strings."""
    return {"version": 1, "broker": block.broker_id, "block_start": str(block.first_id),
            "block_end": str(block.last_id)}


def decode_producer_id_block(data: bytes, path: str) -> ProducerIdBlock:
    try:
        obj = json.loads(data.decode())
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; deep nesting
        raise CorruptMetadata(path, f"invalid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise CorruptMetadata(path, "not a JSON object")
    if obj.get("version") != 1 or isinstance(obj.get("version"), bool):
        raise CorruptMetadata(path, f"unknown version {obj.get('version')!r} (known: 1)")
    try:
        broker, start, end = obj["broker"], int(obj["block_start"]), int(obj["block_end"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadata(path, f"malformed producer id block ({type(exc).__name__}: {exc})") from None
    if not isinstance(broker, int) or isinstance(broker, bool) or start < 0 or end < start:
        raise CorruptMetadata(path, f"malformed producer id block (broker {broker!r}, {start} to {end})")
    return ProducerIdBlock(broker, start, end - start + 1)


def encode_log_dir_event(broker_id: int) -> dict[str, Any]:
    return {"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT}


def encode_offline_replicas(replicas: Collection[tuple[str, int]]) -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(replicas)]}


def decode_offline_replicas(obj: Mapping[str, Any], path: str) -> frozenset[tuple[str, int]]:
    partitions = obj.get("partitions")
    if obj.get("version") != 1 or not isinstance(partitions, list):
        raise CorruptMetadata(path, "not an offline replicas record (version 1 with partitions)")
    found = set()
    for item in partitions:
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        if not isinstance(topic, str) or type(partition) is not int:
            raise CorruptMetadata(path, f"not a partition: {item!r}")
        found.add((topic, partition))
    return frozenset(found)
