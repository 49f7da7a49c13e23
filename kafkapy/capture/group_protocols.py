"""The consumer protocol's bytes in a classic group's messages, decoded beside them in the rows.

JoinGroup, SyncGroup and DescribeGroups carry the members' subscriptions and assignments as bytes
whose format is the group's protocol type's business. For protocol type ``consumer`` (every Kafka
consumer's) they are a ConsumerProtocolSubscription or ConsumerProtocolAssignment
(:mod:`kafkapy.protocol.consumer_protocol`), and an analyst wants their topics, not base64. So a
row of one of these messages gets, beside each such field, the field decoded:

    message               the bytes                              decoded beside them
    JoinGroup request     protocols[].metadata                   metadata_decoded
    JoinGroup response    members[].metadata                     metadata_decoded
    SyncGroup request     assignments[].assignment               assignment_decoded
    SyncGroup response    assignment                             assignment_decoded
    DescribeGroups resp.  groups[].members[].member_metadata     member_metadata_decoded
                          groups[].members[].member_assignment   member_assignment_decoded

A decoded value is ``{"version": N, <the message's fields>}`` (bytes in base64, as in any body);
``null`` for empty bytes (a follower's empty assignment, an error answer's); ``{"error": "..."}``
for bytes that are not one (the raw bytes stay, the row is as good as before). The topics they
name join the row's ``topics``, so ``--topic`` finds a group's rebalance.

The protocol type is the message's own (JoinGroup requests, JoinGroup responses from v7,
SyncGroup from v5, DescribeGroups per group), else the row's request's, else that of the group's
last JoinGroup request earlier in the capture: a SyncGroup v0-v4 does not say it.

These messages are rare (one per member per rebalance), so their JSON text is read back and
written again; no other row pays anything.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable
from typing import Any

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import get_api
from kafkapy.protocol.consumer_protocol import (
    ASSIGNMENT,
    SUBSCRIPTION,
    ConsumerProtocolError,
    decode_body,
    protocol_version,
)

__all__ = ["CONSUMER", "DECODED_SUFFIX", "GroupProtocols"]

#: The protocol type of Kafka's consumers (``ConsumerProtocol.PROTOCOL_TYPE``).
CONSUMER = "consumer"
#: What a decoded field's key adds to its bytes' key.
DECODED_SUFFIX = "_decoded"
# positions in kafkapy.capture.rows.COLUMNS (a test holds them to it)
_API_KEY, _REQUEST, _RESPONSE, _TOPICS = 4, 9, 10, 18
# Where JoinGroup's and SyncGroup's bytes sit, in the request and in the response: the array of
# structs that hold them (None: the body itself), their key, and what they are.
_Site = tuple[str | None, str, str]
_SITES: dict[int, tuple[_Site, _Site]] = {
    ApiKey.JOIN_GROUP: (("protocols", "metadata", SUBSCRIPTION), ("members", "metadata", SUBSCRIPTION)),
    ApiKey.SYNC_GROUP: (("assignments", "assignment", ASSIGNMENT), (None, "assignment", ASSIGNMENT)),
}
# Groups whose protocol type a capture keeps: far more than a cluster runs; past it a hostile
# capture teaches no more, and the groups already known still count.
MAX_GROUPS = 100_000

Row = tuple[Any, ...]


def api_versions(api_key: int) -> range:
    """Every version of an API kafkapy decodes."""
    api = get_api(api_key)
    return range(0) if api is None else range(api.versions.low, api.versions.high + 1)


def _decoded(name: str, text: Any, topics: list[str]) -> Any:
    """The JSON value beside one field's bytes (base64 ``text``); its topics go to ``topics``."""
    if not isinstance(text, str):
        return None
    try:
        data = binascii.a2b_base64(text)
    except binascii.Error:
        return None  # not the rows' base64: a custom decoder's text, left alone
    if not data:
        return None
    try:
        body = decode_body(name, data)
    except ConsumerProtocolError as exc:
        return {"error": str(exc)}
    for topic in body.get("topics") or ():
        if topic not in topics:
            topics.append(topic)
    for entry in [*(body.get("owned_partitions") or ()), *(body.get("assigned_partitions") or ())]:
        if entry["topic"] not in topics:
            topics.append(entry["topic"])
    return {"version": protocol_version(data), **body}


def _beside(struct: dict[str, Any], key: str, name: str, topics: list[str]) -> None:
    """``struct`` with ``key``'s decoded value inserted right after it (a dict keeps its order)."""
    if key not in struct:
        return
    fields = list(struct.items())
    struct.clear()
    for field, value in fields:
        struct[field] = value
        if field == key:
            struct[key + DECODED_SUFFIX] = _decoded(name, value, topics)


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return binascii.b2a_base64(value, newline=False).decode("ascii")
    raise TypeError(f"no JSON form for {type(value).__name__}")


def _dumps(body: dict[str, Any]) -> str:
    """The text the rows' JSON decoders write (compact, not ASCII-escaped, the same escaper)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=_plain)


def _loads(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _type(body: dict[str, Any] | None) -> str | None:
    found = None if body is None else body.get("protocol_type")
    return found if isinstance(found, str) else None


class GroupProtocols:
    """The protocol type of each group one capture's JoinGroup requests declared, and the rows
    of the messages above with their consumer-protocol bytes decoded."""

    def __init__(self) -> None:
        self.types: dict[str, str] = {}

    def handlers(self) -> dict[tuple[int, int], Callable[[Row], Row]]:
        """What :func:`kafkapy.capture.rows.decode_capture_values` calls on a row, by API key and
        version (every version of the three messages)."""
        by_key = {ApiKey.JOIN_GROUP: self.join_or_sync, ApiKey.SYNC_GROUP: self.join_or_sync,
                  ApiKey.DESCRIBE_GROUPS: self.describe_groups}
        return {(key, version): handler for key, handler in by_key.items()
                for version in api_versions(key)}

    def _group_type(self, request: dict[str, Any] | None) -> str | None:
        declared = _type(request)
        group = None if request is None else request.get("group_id")
        if not isinstance(group, str):
            return declared
        if declared is not None and request is not None and "protocols" in request:  # a JoinGroup
            if len(self.types) < MAX_GROUPS or group in self.types:
                self.types[group] = declared
        return declared or self.types.get(group)

    def join_or_sync(self, row: Row) -> Row:
        """A JoinGroup's or SyncGroup's row (the table :data:`_SITES` says where their bytes are)."""
        request, response = _loads(row[_REQUEST]), _loads(row[_RESPONSE])
        declared = self._group_type(request)
        topics = list(row[_TOPICS] or ())
        changed = False
        request_site, response_site = _SITES[row[_API_KEY]]
        for body, own, (array, key, name) in ((request, None, request_site),
                                              (response, _type(response), response_site)):
            if body is None or (own or declared) != CONSUMER:
                continue
            for struct in (body.get(array) or ()) if array is not None else (body,):
                _beside(struct, key, name, topics)
                changed = True
        return self._row(row, request, response, topics) if changed else row

    def describe_groups(self, row: Row) -> Row:
        response = _loads(row[_RESPONSE])
        topics = list(row[_TOPICS] or ())
        changed = False
        for group in (response or {}).get("groups") or ():
            if _type(group) == CONSUMER:
                for member in group.get("members") or ():
                    _beside(member, "member_metadata", SUBSCRIPTION, topics)
                    _beside(member, "member_assignment", ASSIGNMENT, topics)
                    changed = True
        return self._row(row, None, response, topics) if changed else row

    @staticmethod
    def _row(row: Row, request: dict[str, Any] | None, response: dict[str, Any] | None,
             topics: list[str]) -> Row:
        values = list(row)
        if request is not None:
            values[_REQUEST] = _dumps(request)
        if response is not None:
            values[_RESPONSE] = _dumps(response)
        values[_TOPICS] = topics
        return tuple(values)
