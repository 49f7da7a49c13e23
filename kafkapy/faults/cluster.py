"""Cluster-level faults on running brokers: move a partition's leader, end a group session now.

Both act on a cluster's running brokers (``ClusterMember``s: BrokerRuntimes sharing one store)
through the brokers' own paths, so clients see what they would see from Kafka:

* ``move_leader`` asks the controller (kafkapy.server.leadership) to make a broker the
  partition's preferred replica and run a preferred election on it; the controller writes the
  move with a compare-and-set on the partition state and the leader epoch goes up by one. It
  returns once every running broker's view shows the new leader at the new epoch, so a client's
  next Metadata names it; the old leader answers NOT_LEADER_OR_FOLLOWER, and the new one
  FENCED_LEADER_EPOCH to a request that still carries the old epoch. The logs stay where they
  are (shared in-process), so nothing is lost.
* ``move_coordinator`` is ``move_leader`` on the partition of ``__transaction_state`` or
  ``__consumer_offsets`` that holds a transactional id or a group (``coordinator_partition``:
  the coordinators' own Kafka hash of the id, over their configured partition count), so a test
  moves a coordinator without knowing where the id lives. The new leader loads the partition
  from the shared log on the next request; the old one answers NOT_COORDINATOR.
* ``expire_session`` ends a group member's session at the group's coordinator as a timeout
  would (kafkapy.groups.module.GroupsModule.expire_session).

The third cluster fault, an unavailable coordinator, is kafkapy.faults.coordinators.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Protocol

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.partitioning import OFFSETS_TOPIC
from kafkapy.server.leadership import PartitionLeadership
from kafkapy.server.modules import Module
from kafkapy.server.services import ClusterView
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC
from kafkapy.transactions.module import TransactionsModule

__all__ = ["ClusterMember", "LeaderMove", "coordinator_partition", "expire_session", "move_coordinator",
           "move_leader"]

SETTLE_TIMEOUT_S = 10.0  # how long every broker's view may take to show the move
SETTLE_POLL_S = 0.002


class ClusterMember(Protocol):
    """What these faults use of a running broker (a BrokerRuntime is one): its view of the
    cluster, its controller part, its modules."""

    @property
    def broker_id(self) -> int: ...

    @property
    def cluster(self) -> ClusterView: ...

    @property
    def leadership(self) -> PartitionLeadership | None: ...

    @property
    def modules(self) -> Sequence[Module]: ...


@attrs.frozen
class LeaderMove:
    """A leader move as every running broker came to see it."""

    topic: str
    partition: int
    previous_leader: int
    leader: int
    leader_epoch: int  # the new epoch: the previous one + 1
    replicas: tuple[int, ...]  # the new replica list, the leader first


async def move_leader(runtimes: Sequence[ClusterMember], topic: str, partition: int, to: int,
                      timeout: float = SETTLE_TIMEOUT_S) -> LeaderMove:
    """Make broker ``to`` the leader of ``topic``-``partition`` (the module docstring). One
    KafkaApiError when it cannot move: UNKNOWN_TOPIC_OR_PARTITION, ELIGIBLE_LEADERS_NOT_AVAILABLE
    (one live broker: nowhere to move), BROKER_NOT_AVAILABLE (``to`` is not a running broker),
    PREFERRED_LEADER_NOT_AVAILABLE (``to`` holds it in a failed log dir), ELECTION_NOT_NEEDED (it
    leads already), NOT_CONTROLLER (no running broker is the controller)."""
    if not runtimes:
        raise KafkaApiError(ErrorCode.BROKER_NOT_AVAILABLE, "no broker is running")
    view = runtimes[0].cluster
    before = view.leadership(topic, partition)
    if before is None:
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}")
    controller = next((r for r in runtimes if r.broker_id == view.controller_id), None)
    if controller is None or controller.leadership is None:
        raise KafkaApiError(ErrorCode.NOT_CONTROLLER, f"no running broker is the controller "
                            f"(the store names broker {view.controller_id})")
    replicas = await controller.leadership.move_leader(topic, partition, to)
    previous, epoch = before
    deadline = time.monotonic() + timeout
    while True:
        lagging = [r.broker_id for r in runtimes if not _shows(r, topic, partition, replicas, epoch)]
        if not lagging:
            found = runtimes[0].cluster.leadership(topic, partition)
            assert found is not None
            return LeaderMove(topic, partition, previous, to, found[1], replicas)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{topic}-{partition}: brokers {lagging} do not show broker {to} leading "
                               f"after epoch {epoch} within {timeout:g} s")
        await asyncio.sleep(SETTLE_POLL_S)


def coordinator_partition(runtime: ClusterMember, *, transactional_id: str | None = None,
                          group: str | None = None) -> tuple[str, int]:
    """The partition of ``__transaction_state`` or ``__consumer_offsets`` whose leader coordinates
    ``transactional_id`` or ``group``, as ``runtime``'s coordinators place it. ValueError unless
    exactly one is given, or when the broker runs no such coordinator."""
    if (transactional_id is None) == (group is None):
        raise ValueError("give transactional_id or group (one of them): whose coordinator")
    if transactional_id is not None:
        transactions = next((m for m in runtime.modules if isinstance(m, TransactionsModule)), None)
        if transactions is None:
            raise ValueError("the broker runs no transaction coordinator")
        return TRANSACTION_STATE_TOPIC, transactions.coordinator.partition_for(transactional_id)
    assert group is not None
    groups = next((m for m in runtime.modules if isinstance(m, GroupsModule)), None)
    if groups is None:
        raise ValueError("the broker runs no group coordinator")
    return OFFSETS_TOPIC, groups.group_log.partition_for(group)


async def move_coordinator(runtimes: Sequence[ClusterMember], *, transactional_id: str | None = None,
                           group: str | None = None, to: int,
                           timeout: float = SETTLE_TIMEOUT_S) -> LeaderMove:
    """Make broker ``to`` the coordinator of ``transactional_id`` or ``group``: ``move_leader`` on
    its partition of the state topic (the module docstring). Beyond move_leader's refusals,
    COORDINATOR_NOT_AVAILABLE while no id of that kind has found its coordinator yet (the state
    topic is made on the first FindCoordinator, as in Kafka)."""
    if not runtimes:
        raise KafkaApiError(ErrorCode.BROKER_NOT_AVAILABLE, "no broker is running")
    topic, partition = coordinator_partition(runtimes[0], transactional_id=transactional_id, group=group)
    if topic not in runtimes[0].cluster.topics:
        kind = "transactional id" if transactional_id is not None else "group"
        raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                            f"no {kind} has found its coordinator on these brokers yet (there is no "
                            f"{topic}): a client's FindCoordinator makes it")
    return await move_leader(runtimes, topic, partition, to, timeout)


def _shows(runtime: ClusterMember, topic: str, partition: int, replicas: tuple[int, ...],
           old_epoch: int) -> bool:
    """``runtime``'s view has the new replica list and its leader at an epoch past ``old_epoch``."""
    info = runtime.cluster.topics.get(topic)
    found = runtime.cluster.leadership(topic, partition)
    return (info is not None and tuple(info.partitions.get(partition, ())) == replicas
            and found is not None and found[0] == replicas[0] and found[1] > old_epoch)


async def expire_session(runtimes: Sequence[ClusterMember], group_id: str, *, member_id: str | None = None,
                         client_id: str | None = None) -> list[str]:
    """End the session of a member of ``group_id`` (by member id, or every member with a client id)
    at the broker that coordinates the group, now; answers the member ids expired. ValueError
    unless exactly one of ``member_id``/``client_id`` is given; KafkaApiError GROUP_ID_NOT_FOUND
    before any group has a coordinator, NOT_COORDINATOR when no running broker coordinates the
    group, or the coordinator's refusal (GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID)."""
    if (member_id is None) == (client_id is None):
        raise ValueError("give member_id or client_id (one of them)")
    if runtimes and all(OFFSETS_TOPIC not in runtime.cluster.topics for runtime in runtimes):
        # no group has found its coordinator yet, so no broker coordinates any: the group is not
        # there (NOT_COORDINATOR would send a test looking for a coordinator problem)
        raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist: no group "
                            f"has joined or committed on these brokers yet (there is no {OFFSETS_TOPIC})")
    refusals = []
    for runtime in runtimes:
        groups = next((m for m in runtime.modules if isinstance(m, GroupsModule)), None)
        if groups is None:
            continue
        try:
            return await groups.expire_session(group_id, member_id=member_id, client_id=client_id)
        except KafkaApiError as refusal:
            if refusal.code not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                raise
            refusals.append(f"broker {runtime.broker_id}: {refusal}")
    raise KafkaApiError(ErrorCode.NOT_COORDINATOR, f"no running broker coordinates group {group_id!r} "
                        f"({'; '.join(refusals) or 'none runs a group coordinator'})")
