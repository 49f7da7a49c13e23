"""A KIP-848 consumer group without a network: three members share a six-partition topic, one
leaves, and the others take its partitions only after each step's revocations were acknowledged.

Run: ``python examples/consumer_group_rebalance.py``. Prints one JSON line per heartbeat round:
each member's epoch and the partitions it was told it owns.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

from kafkapy.groups.consumer_group import ConsumerGroups, HeartbeatRequest, TopicInfo

TOPIC = TopicInfo(uuid.uuid5(uuid.NAMESPACE_DNS, "orders"), partitions=6)
groups = ConsumerGroups(lambda: {"orders": TOPIC})


@dataclasses.dataclass
class Member:
    epoch: int = 0
    owned: list[int] = dataclasses.field(default_factory=list)


members: dict[str, Member] = {}


def heartbeat(member_id: str, now_ms: int) -> None:
    member = members.setdefault(member_id, Member())
    joining = member.epoch == 0
    response = groups.heartbeat(HeartbeatRequest(
        group_id="example", member_id=member_id, member_epoch=member.epoch,
        rebalance_timeout_ms=60_000 if joining else -1,
        subscribed_topic_names=("orders",) if joining else None,
        topic_partitions={} if joining else {TOPIC.topic_id: frozenset(member.owned)}), now_ms).response
    member.epoch = response.member_epoch
    if response.assignment is not None:  # a real consumer revokes/assigns here, then reports it
        member.owned = sorted(response.assignment.get(TOPIC.topic_id, ()))


def round_of_heartbeats(step: str, now_ms: int) -> None:
    for member_id in sorted(members):
        heartbeat(member_id, now_ms)
    group = groups.groups["example"]
    print(json.dumps({"step": step, "group_epoch": group.group_epoch, "state": group.state.value,
                      "members": {m: dataclasses.asdict(s) for m, s in sorted(members.items())}}))


for name in ("a", "b", "c"):
    heartbeat(name, 0)
for i in range(3):
    round_of_heartbeats(f"three members, round {i + 1}", 1_000 * (i + 1))

groups.heartbeat(HeartbeatRequest(group_id="example", member_id="c", member_epoch=-1), 5_000)
del members["c"]
for i in range(3):
    round_of_heartbeats(f"c left, round {i + 1}", 6_000 + 1_000 * i)
