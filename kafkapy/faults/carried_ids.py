"""Which group ids and transactional ids a request carries, by API: what ``FaultRule(group=...)``
and ``FaultRule(transactional_id=...)`` match on.

The fields differ by API and by version (AddPartitionsToTxn's ``v3_and_below_transactional_id``
becomes v4+'s batched ``transactions[].transactional_id``, OffsetFetch's ``group_id`` v8+'s
``groups[].group_id``), so they are a table read from Kafka's request specs, one row per API: a
row lists dotted paths, each step through an array reaching into every element. A decoded body
holds only the fields of its version, so a path the version lacks yields nothing.
FindCoordinator's keys are ids of the kind its ``key_type`` names (absent before v1: a group);
a share-group key (``group:topic-id:partition``, KIP-932) names a share partition and is left out.
tests/faults/test_carried_ids.py holds the table to the specs: every path exists, and every
request field of these names is in it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from typing import Any

from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["FIND_COORDINATOR_KEYS", "ID_FIELDS", "IdKind", "apis_carrying", "carried_ids"]


class IdKind(enum.Enum):
    GROUP = "group"
    TRANSACTION = "transactional_id"


_GROUP_ID = ("group_id",)
ID_FIELDS: Mapping[IdKind, Mapping[ApiKey, tuple[str, ...]]] = {
    IdKind.TRANSACTION: {
        ApiKey.PRODUCE: ("transactional_id",),  # v3+, null for a non-transactional producer
        ApiKey.INIT_PRODUCER_ID: ("transactional_id",),
        ApiKey.ADD_PARTITIONS_TO_TXN: ("v3_and_below_transactional_id", "transactions.transactional_id"),
        ApiKey.ADD_OFFSETS_TO_TXN: ("transactional_id",),
        ApiKey.END_TXN: ("transactional_id",),
        ApiKey.TXN_OFFSET_COMMIT: ("transactional_id",),
        ApiKey.DESCRIBE_TRANSACTIONS: ("transactional_ids",),
    },
    IdKind.GROUP: {
        ApiKey.OFFSET_COMMIT: _GROUP_ID,
        ApiKey.OFFSET_FETCH: ("group_id", "groups.group_id"),  # one group to v7, a batch from v8
        ApiKey.JOIN_GROUP: _GROUP_ID,
        ApiKey.HEARTBEAT: _GROUP_ID,
        ApiKey.LEAVE_GROUP: _GROUP_ID,
        ApiKey.SYNC_GROUP: _GROUP_ID,
        ApiKey.DESCRIBE_GROUPS: ("groups",),
        ApiKey.ADD_OFFSETS_TO_TXN: _GROUP_ID,
        ApiKey.TXN_OFFSET_COMMIT: _GROUP_ID,
        ApiKey.DELETE_GROUPS: ("groups_names",),
        ApiKey.OFFSET_DELETE: _GROUP_ID,
        ApiKey.CONSUMER_GROUP_HEARTBEAT: _GROUP_ID,
        ApiKey.CONSUMER_GROUP_DESCRIBE: ("group_ids",),
        ApiKey.SHARE_GROUP_HEARTBEAT: _GROUP_ID,
        ApiKey.SHARE_GROUP_DESCRIBE: ("group_ids",),
        ApiKey.SHARE_FETCH: _GROUP_ID,
        ApiKey.SHARE_ACKNOWLEDGE: _GROUP_ID,
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: _GROUP_ID,
        ApiKey.READ_SHARE_GROUP_STATE: _GROUP_ID,
        ApiKey.WRITE_SHARE_GROUP_STATE: _GROUP_ID,
        ApiKey.DELETE_SHARE_GROUP_STATE: _GROUP_ID,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _GROUP_ID,
        ApiKey.STREAMS_GROUP_HEARTBEAT: _GROUP_ID,
        ApiKey.STREAMS_GROUP_DESCRIBE: ("group_ids",),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ("groups.group_id",),
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: _GROUP_ID,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: _GROUP_ID,
        ApiKey.REGISTER_CONSUMER: _GROUP_ID,
    },
}

FIND_COORDINATOR_KEYS = ("key", "coordinator_keys")  # v0-3 one key, v4+ a batch (KIP-699)
_KEY_TYPES = {IdKind.GROUP: CoordinatorKeyType.GROUP, IdKind.TRANSACTION: CoordinatorKeyType.TRANSACTION}


def apis_carrying(kind: IdKind) -> frozenset[ApiKey]:
    """The APIs whose requests can carry an id of ``kind`` (FindCoordinator's included)."""
    return frozenset({*ID_FIELDS[kind], ApiKey.FIND_COORDINATOR})


def carried_ids(api_key: int, body: Mapping[str, Any], kind: IdKind) -> Iterator[str]:
    """Every id of ``kind`` the request body of ``api_key`` names (none for other APIs)."""
    if api_key == ApiKey.FIND_COORDINATOR:
        if body.get("key_type", CoordinatorKeyType.GROUP) != _KEY_TYPES[kind]:
            return
        paths: tuple[str, ...] = FIND_COORDINATOR_KEYS
    else:
        # ApiKey is an IntEnum: a plain int finds its row, and an unknown key none
        paths = ID_FIELDS[kind].get(api_key, ())  # type: ignore[call-overload]
    for path in paths:
        yield from _at(body, path.split("."))


def _at(value: Any, steps: list[str]) -> Iterator[str]:
    if isinstance(value, list):
        for item in value:
            yield from _at(item, steps)
    elif not steps:
        if isinstance(value, str):
            yield value
    elif isinstance(value, Mapping):
        yield from _at(value.get(steps[0]), steps[1:])
