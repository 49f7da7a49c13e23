"""A test-only module that serves KIP-848 groups end to end for real clients, until the group
coordinator module (FindCoordinator, offsets in ``__consumer_offsets``) is merged with them.

ConsumerGroupHeartbeat and ConsumerGroupDescribe are kafkapy's own handlers; FindCoordinator
names this broker for every key, and OffsetCommit/OffsetFetch (v8-9) keep offsets in a dict, with
no checks. Those three are scaffolding, not the coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from kafkapy.errors import ErrorCode
from kafkapy.groups.consumer_group import ConsumerGroups, TopicInfo
from kafkapy.groups.consumer_handlers import ConsumerGroupHandlers, monotonic_ms
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.server.services import BrokerServices

NO_OFFSET = -1


class ConsumerProtocolModule(Module):
    name = "kip848-test"

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.handlers = ConsumerGroupHandlers(ConsumerGroups(self.topics))
        self.offsets: dict[tuple[str, str, int], int] = {}
        self._timer: asyncio.Task[None] | None = None

    def topics(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(info.topic_id, len(info.partitions))
                for name, info in self.services.cluster.topics.items()}

    def apis(self) -> Mapping[int, ApiHandler]:
        return {**self.handlers.apis(),
                ApiKey.FIND_COORDINATOR: ApiHandler(VersionRange(0, 6), self.find_coordinator),
                ApiKey.OFFSET_COMMIT: ApiHandler(VersionRange(8, 9), self.offset_commit),
                ApiKey.OFFSET_FETCH: ApiHandler(VersionRange(8, 9), self.offset_fetch)}

    async def start(self) -> None:
        self._timer = asyncio.get_running_loop().create_task(self._expire_members())

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer

    async def _expire_members(self) -> None:
        while True:
            deadline = self.handlers.next_deadline()
            wait_ms = 1_000 if deadline is None else min(1_000, max(0, deadline - monotonic_ms()))
            await asyncio.sleep(wait_ms / 1000)
            await self.handlers.expire()

    def find_coordinator(self, context: RequestContext, request: Request) -> dict[str, Any]:
        host, port = context.connection.broker_address
        node = {"node_id": self.services.broker_id, "host": host, "port": port,
                "error_code": ErrorCode.NONE, "error_message": None}
        if context.api_version >= 4:
            return {"throttle_time_ms": 0,
                    "coordinators": [{"key": key, **node} for key in request.body["coordinator_keys"]]}
        return {"throttle_time_ms": 0, **node}

    def offset_commit(self, context: RequestContext, request: Request) -> dict[str, Any]:
        group = request.body["group_id"]
        topics = []
        for topic in request.body["topics"]:
            for partition in topic["partitions"]:
                key = (group, topic["name"], partition["partition_index"])
                self.offsets[key] = partition["committed_offset"]
            topics.append({"name": topic["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": ErrorCode.NONE}
                for p in topic["partitions"]]})
        return {"throttle_time_ms": 0, "topics": topics}

    def offset_fetch(self, context: RequestContext, request: Request) -> dict[str, Any]:
        groups = []
        for group in request.body["groups"]:
            group_id = group["group_id"]
            asked = group["topics"]
            if asked is None:
                names = sorted({t for g, t, _ in self.offsets if g == group_id})
                asked = [{"name": name, "partition_indexes": sorted(
                    p for g, t, p in self.offsets if g == group_id and t == name)} for name in names]
            topics = [{"name": topic["name"], "partitions": [
                {"partition_index": p, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": ErrorCode.NONE,
                 "committed_offset": self.offsets.get((group_id, topic["name"], p), NO_OFFSET)}
                for p in topic["partition_indexes"]]} for topic in asked]
            groups.append({"group_id": group_id, "topics": topics, "error_code": ErrorCode.NONE})
        return {"throttle_time_ms": 0, "groups": groups}
