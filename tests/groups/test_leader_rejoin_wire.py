"""The broker's side of the kafka-python flake in test_group_clients, request by request: a
leader's own JoinGroup in a Stable group starts a rebalance that the follower learns of from its
heartbeat; the new generation completes with both; a leader that then falls silent is removed when
its session runs out, the survivor rebalances alone, and the silent member's Heartbeat and
LeaveGroup get UNKNOWN_MEMBER_ID. Every answer is the one Kafka's GroupMetadataManager
(classicGroupJoinExistingMember, classicGroupSync, classicGroupHeartbeat) gives.

Each member has a connection of its own: a JoinGroup is answered only when the rebalance ends,
and a connection answers in order."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

GROUP = "g-leader-rejoin"
SESSION_MS = 1000
SUBSCRIPTION = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # v1: topics [t], no user data


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1, "group.min.session.timeout.ms": SESSION_MS}) as running:
        with SimpleClient(running.bootstrap_servers) as client:
            wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 3,
                                              {"key": GROUP, "key_type": CoordinatorKeyType.GROUP})
                       ["error_code"] == ErrorCode.NONE, what="a coordinator")
        yield running


class Member:
    """One group member on its own connection; ``join`` runs on a thread, as it may wait."""

    def __init__(self, broker: Broker, pool: ThreadPoolExecutor) -> None:
        self.client = SimpleClient(broker.bootstrap_servers, timeout=30)
        self.pool = pool
        self.member_id = ""
        self.generation = -1

    def join(self) -> Future[Any]:
        def joined() -> Any:
            body = {"group_id": GROUP, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 10000,
                    "member_id": self.member_id, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]}
            answer = self.client.request(ApiKey.JOIN_GROUP, 7, body)
            if answer["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
                answer = self.client.request(ApiKey.JOIN_GROUP, 7, {**body, "member_id": answer["member_id"]})
            if answer["error_code"] == ErrorCode.NONE:
                self.member_id, self.generation = answer["member_id"], answer["generation_id"]
            return answer
        return self.pool.submit(joined)

    def sync(self, assignments: dict[str, bytes] | None = None) -> Any:
        return self.client.request(ApiKey.SYNC_GROUP, 5, {
            "group_id": GROUP, "generation_id": self.generation, "member_id": self.member_id,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]})

    def heartbeat(self) -> ErrorCode:
        answer = self.client.request(ApiKey.HEARTBEAT, 4, {
            "group_id": GROUP, "generation_id": self.generation, "member_id": self.member_id})
        return ErrorCode(answer["error_code"])

    def leave(self) -> ErrorCode:
        answer = self.client.request(ApiKey.LEAVE_GROUP, 4, {"group_id": GROUP,
                                                             "members": [{"member_id": self.member_id}]})
        return ErrorCode(answer["members"][0]["error_code"])


def rejoin_after_heartbeat(member: Member) -> Any:
    """What a client does: heartbeat until told REBALANCE_IN_PROGRESS, then rejoin."""
    wait_until(lambda: member.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS, 10, "REBALANCE_IN_PROGRESS")
    return member.join().result(10)


def test_a_leaders_own_rejoin_then_its_silence(broker: Broker) -> None:
    with ThreadPoolExecutor(2) as pool:
        leader, follower = Member(broker, pool), Member(broker, pool)
        try:
            leader_rejoins_then_falls_silent(leader, follower)
        finally:
            leader.client.close()
            follower.client.close()


def leader_rejoins_then_falls_silent(leader: Member, follower: Member) -> None:
    first = leader.join().result(10)
    assert (first["error_code"], first["leader"]) == (ErrorCode.NONE, leader.member_id)
    assert leader.sync({leader.member_id: b"all"})["assignment"] == b"all"
    joining = follower.join()
    assert rejoin_after_heartbeat(leader)["generation_id"] == joining.result(10)["generation_id"] == 2
    assert leader.sync({leader.member_id: b"L", follower.member_id: b"F"})["assignment"] == b"L"
    assert follower.sync()["assignment"] == b"F"
    assert follower.heartbeat() == ErrorCode.NONE

    # The leader rejoins a Stable group by itself (as kafka-python's does when its topic
    # metadata changes): the group rebalances, and the follower hears of it by heartbeat.
    own = leader.join()
    again = rejoin_after_heartbeat(follower)
    assert (own.result(10)["generation_id"], again["generation_id"]) == (3, 3)
    assert own.result()["leader"] == leader.member_id and len(own.result()["members"]) == 2
    assert again["members"] == [], "only the leader sees the members"
    last_word = time.monotonic()  # the leader's last request follows: its session starts after this
    assert leader.sync({leader.member_id: b"L3", follower.member_id: b"F3"})["assignment"] == b"L3"
    assert follower.sync()["assignment"] == b"F3"

    # Now the leader falls silent (kafka-python's stranded round): once its session has run out
    # the follower is told to rejoin, and it forms generation 4 alone, as its leader.
    alone = rejoin_after_heartbeat(follower)
    assert time.monotonic() - last_word >= SESSION_MS / 1000
    assert (alone["generation_id"], alone["leader"]) == (4, follower.member_id)
    assert [m["member_id"] for m in alone["members"]] == [follower.member_id]
    assert follower.sync({follower.member_id: b"F4"})["assignment"] == b"F4"
    assert leader.heartbeat() == ErrorCode.UNKNOWN_MEMBER_ID
    assert leader.leave() == ErrorCode.UNKNOWN_MEMBER_ID
    assert follower.heartbeat() == ErrorCode.NONE
