"""OffsetCommit v0 and OffsetFetch v0: offsets kept in the metadata store, as Kafka 2.8-3.9 kept them.

Before Kafka 0.8.2 a consumer's offsets lived in ZooKeeper, and Kafka's ZooKeeper-mode brokers
kept answering the v0 requests from there to the end (KafkaApis' ``apiVersion == 0`` branches):
a commit is written to ``/consumers/<group>/offsets/<topic>/<partition>`` (the offset as a decimal
string) and a fetch reads it back. Neither asks the group coordinator, so any broker answers,
and neither touches ``__consumer_offsets``: a v0 commit is invisible to a v1+ fetch and the other
way round, as in Kafka. The same znodes hold the seed-001 coordinator's offsets
(kafkapy.coordination), through the same store calls.

Checks, in Kafka's order: READ on the group for a commit, DESCRIBE for a fetch (else every
partition GROUP_AUTHORIZATION_FAILED), the same on each topic (TOPIC_AUTHORIZATION_FAILED), the
partition exists (UNKNOWN_TOPIC_OR_PARTITION; for a fetch with offset -1, which is also the answer
for a partition with no offset committed: Kafka's OffsetFetchResponse.UNKNOWN_PARTITION, where a
v1+ fetch says -1 and no error), metadata within ``offset.metadata.max.bytes``
(OFFSET_METADATA_TOO_LARGE; v0 stores no metadata, but Kafka checks it), and then that the group
id can be a znode of its own under /consumers (``kafkapy.store.znodes.group_id_problem``;
INVALID_GROUP_ID, offset -1 for a fetch). Kafka had no
such check: ZooKeeper's path validation threw and the partition was answered UNKNOWN_SERVER_ERROR
(``.``, ``..``, an empty id, reserved characters), or the write went where it landed (``a/b``
inside group ``a``). Here ``coordinator`` would also be the seed-001 election node, which as an
ephemeral znode cannot have children. Checked on every store, so the memory store refuses what
ZooKeeper would. A store that fails (ZooKeeper unreachable, say) is each partition's
UNKNOWN_SERVER_ERROR, as Kafka answered what its ZooKeeper calls threw; the connection stays open.
Store calls run off the loop: with ZooKeeper each is a round trip.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kafkapy.errors import ErrorCode
from kafkapy.groups.offsets import NO_OFFSET, commit_refusal
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.modules import Answer, RequestContext
from kafkapy.store.base import CoordinatorStore, StoreError
from kafkapy.store.znodes import group_id_problem

__all__ = ["ZooKeeperOffsets"]

log = logging.getLogger(__name__)

Allowed = Callable[[RequestContext, str, str, str], bool]  # (ctx, operation, resource type, name)


class ZooKeeperOffsets:
    def __init__(self, store: CoordinatorStore, allowed: Allowed,
                 partition_exists: Callable[[str, int], bool], metadata_max_bytes: int) -> None:
        self.store = store
        self.allowed = allowed
        self.partition_exists = partition_exists
        self.metadata_max_bytes = metadata_max_bytes

    async def commit(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        group = body["group_id"]
        group_allowed = self.allowed(ctx, "READ", "GROUP", group)
        unfit = group_allowed and _unfit(ctx, group)
        codes: dict[tuple[str, int], ErrorCode] = {}
        writes: dict[tuple[str, int], int] = {}
        for topic in body.get("topics") or []:
            name = topic["name"]
            readable = self.allowed(ctx, "READ", "TOPIC", name)
            for p in topic.get("partitions") or []:
                key = (name, p["partition_index"])
                refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED if not group_allowed else commit_refusal(
                    readable, self.partition_exists(*key), p.get("committed_metadata") or "",
                    self.metadata_max_bytes)
                if refusal is None and unfit:  # in Kafka's place of the write that would fail
                    refusal = ErrorCode.INVALID_GROUP_ID
                codes[key] = ErrorCode.NONE if refusal is None else refusal
                if refusal is None:
                    writes[key] = p["committed_offset"]
        if writes:
            try:
                await asyncio.to_thread(self.store.commit_offsets, group, writes)
            except StoreError as exc:  # Kafka: what the ZooKeeper write threw, per partition
                log.warning("v0 commit of group %r failed: %s", group, exc)
                codes.update(dict.fromkeys(writes, ErrorCode.UNKNOWN_SERVER_ERROR))
        return fit_body(ApiKey.OFFSET_COMMIT, "response", ctx.api_version, {"topics": _by_topic(
            {key: {"error_code": code} for key, code in codes.items()})})

    async def fetch(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        group = body["group_id"]
        group_allowed = self.allowed(ctx, "DESCRIBE", "GROUP", group)
        unfit = group_allowed and _unfit(ctx, group)
        stored: dict[tuple[str, int], int] = {}
        unreadable = False
        if group_allowed and not unfit:
            try:
                stored = await asyncio.to_thread(self.store.offsets, group)
            except StoreError as exc:  # Kafka: what the ZooKeeper read threw, per partition
                log.warning("v0 fetch of group %r failed: %s", group, exc)
                unreadable = True
        answers: dict[tuple[str, int], Mapping[str, Any]] = {}
        for topic in body.get("topics") or []:
            name = topic["name"]
            describable = self.allowed(ctx, "DESCRIBE", "TOPIC", name)
            for index in topic.get("partition_indexes") or []:
                key = (name, index)
                if not group_allowed:  # v0-v1 carry a request's error in every partition
                    answers[key] = _fetched(NO_OFFSET, ErrorCode.GROUP_AUTHORIZATION_FAILED)
                elif not describable:
                    answers[key] = _fetched(NO_OFFSET, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif not self.partition_exists(*key):
                    answers[key] = _fetched(NO_OFFSET, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif unfit:
                    answers[key] = _fetched(NO_OFFSET, ErrorCode.INVALID_GROUP_ID)
                elif unreadable:
                    answers[key] = _fetched(NO_OFFSET, ErrorCode.UNKNOWN_SERVER_ERROR)
                elif key not in stored:  # no znode: Kafka's answer is the unknown partition's too
                    answers[key] = _fetched(NO_OFFSET, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    answers[key] = _fetched(stored[key], ErrorCode.NONE)
        return fit_body(ApiKey.OFFSET_FETCH, "response", ctx.api_version, {"topics": _by_topic(answers)})


def _unfit(ctx: RequestContext, group: str) -> bool:
    """The group id cannot be /consumers/<group> (logged once per request)."""
    problem = group_id_problem(group)
    if problem is not None:
        log.info("%s: v%d offsets of group %r refused: group id %s", ctx.connection.id,
                 ctx.api_version, group, problem)
    return problem is not None


def _fetched(offset: int, code: ErrorCode) -> dict[str, Any]:
    return {"committed_offset": offset, "metadata": "", "error_code": code}


def _by_topic(answers: Mapping[tuple[str, int], Mapping[str, Any]]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), fields in answers.items():
        topics.setdefault(name, []).append({"partition_index": index, **fields})
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]
