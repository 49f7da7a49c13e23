"""A simulated KIP-848 consumer for the group tests: it heartbeats like librdkafka's
``group.protocol=consumer`` member, holding what it owns apart from what it was last told."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.assignors import Assignment, TopicId
from kafkapy.groups.consumer_group import ConsumerGroups, HeartbeatRequest, HeartbeatResponse, TopicInfo
from kafkapy.groups.records import GroupRecord

GROUP = "g"


def topic_id(name: str) -> TopicId:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def topics(**partitions: int) -> dict[str, TopicInfo]:
    return {name: TopicInfo(topic_id(name), count) for name, count in partitions.items()}


def parts(assignment: Mapping[TopicId, frozenset[int]] | None) -> set[tuple[TopicId, int]]:
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


class SimConsumer:
    """``owned``: what it holds now; ``told``: the last assignment it was given. It takes up what
    it was told (and lets go of the rest) when it acknowledges, just before a heartbeat."""

    def __init__(self, groups: ConsumerGroups, member_id: str, subscribe: tuple[str, ...] | None = ("t",), *,
                 regex: str | None = None, instance_id: str | None = None, assignor: str | None = None,
                 rebalance_timeout_ms: int = 30_000,
                 journal: list[GroupRecord] | None = None) -> None:
        self.groups = groups
        self.member_id = member_id
        self.subscribe = subscribe
        self.regex = regex
        self.instance_id = instance_id
        self.assignor = assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.epoch = 0
        self.owned: dict[TopicId, frozenset[int]] = {}
        self.told: dict[TopicId, frozenset[int]] = {}
        self.joined = False
        self.journal = journal  # every record its heartbeats wrote, when given

    def request(self, *, report_owned: bool = True) -> HeartbeatRequest:
        joining = self.epoch == 0
        owned: Assignment | None = {} if joining else (dict(self.owned) if report_owned else None)
        return HeartbeatRequest(
            group_id=GROUP, member_id=self.member_id, member_epoch=self.epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms if joining else -1,
            subscribed_topic_names=self.subscribe if joining else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=self.assignor if joining else None, topic_partitions=owned,
            client_id="sim", client_host="/127.0.0.1")

    def heartbeat(self, now_ms: int = 0, *, ack: bool = True, report_owned: bool = True) -> HeartbeatResponse:
        if ack:
            self.owned = dict(self.told)
        try:
            result = self.groups.heartbeat(self.request(report_owned=report_owned), now_ms)
        except KafkaApiError as exc:
            if exc.code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                self.drop()
            raise
        self._keep(result.records)
        response = result.response
        self.joined = True
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.told = dict(response.assignment)
        return response

    def drop(self) -> None:
        """What a fenced or leaving consumer does: give up everything and start over at epoch 0."""
        self.epoch = 0
        self.owned = {}
        self.told = {}
        self.joined = False

    def leave(self, now_ms: int = 0, *, static: bool = False) -> HeartbeatResponse:
        epoch = -2 if static else -1
        request = HeartbeatRequest(group_id=GROUP, member_id=self.member_id, member_epoch=epoch,
                                   instance_id=self.instance_id, client_id="sim", client_host="/127.0.0.1")
        result = self.groups.heartbeat(request, now_ms)
        self._keep(result.records)
        self.drop()
        return result.response

    def _keep(self, records: tuple[GroupRecord, ...]) -> None:
        if self.journal is not None:
            self.journal.extend(records)

    def may_hold(self) -> set[tuple[TopicId, int]]:
        return parts(self.owned) | parts(self.told)
