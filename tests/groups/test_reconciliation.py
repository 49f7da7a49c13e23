"""One member's reconciliation step by step, and the documented member state table."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from kafkapy.groups.reconciliation import NEXT_STATE, NO_OWNER, ConsumerMember, MemberState, Step, reconcile

T = uuid.UUID(int=7)
DOC = Path(__file__).resolve().parents[2] / "docs" / "groups-consumer-protocol.md"


def free(topic: uuid.UUID, partition: int) -> int:
    return NO_OWNER


def held_by_epoch_3(topic: uuid.UUID, partition: int) -> int:
    return 3


def stable(epoch: int, *partitions: int) -> ConsumerMember:
    return ConsumerMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1,
                          assigned={T: frozenset(partitions)} if partitions else {})


def test_the_documented_member_state_table_is_the_code_s() -> None:
    rows = re.findall(r"^\| (STABLE|UNREVOKED_PARTITIONS|UNRELEASED_PARTITIONS) \| (\w+) \| (\w+) \|$",
                      DOC.read_text(), re.MULTILINE)
    documented = {(MemberState[state], Step[step]): MemberState[after] for state, step, after in rows}
    assert documented == dict(NEXT_STATE)


def test_a_reconciled_member_is_left_alone() -> None:
    member = stable(4, 0)
    assert reconcile(member, 4, {T: frozenset([1])}, free, None) is member


def test_new_free_partitions_are_given_at_the_target_epoch() -> None:
    after = reconcile(stable(4, 0), 5, {T: frozenset([0, 1])}, free, {T: frozenset([0])})
    assert (after.state, after.member_epoch, after.previous_member_epoch) == (MemberState.STABLE, 5, 4)
    assert after.assigned == {T: frozenset([0, 1])}


def test_partitions_held_elsewhere_wait() -> None:
    after = reconcile(stable(4, 0), 5, {T: frozenset([0, 1])}, held_by_epoch_3, {T: frozenset([0])})
    assert after.state is MemberState.UNRELEASED_PARTITIONS and after.member_epoch == 5
    assert after.assigned == {T: frozenset([0])}


def test_revocation_comes_first_and_keeps_the_epoch() -> None:
    after = reconcile(stable(4, 0, 1), 5, {T: frozenset([1, 2])}, free, {T: frozenset([0, 1])})
    assert after.state is MemberState.UNREVOKED_PARTITIONS and after.member_epoch == 4
    assert after.assigned == {T: frozenset([1])} and after.pending_revocation == {T: frozenset([0])}

    silent = reconcile(after, 5, {T: frozenset([1, 2])}, free, None)
    assert silent is after, "a heartbeat that does not say what it owns proves nothing"
    still = reconcile(after, 5, {T: frozenset([1, 2])}, free, {T: frozenset([0, 1])})
    assert still is after

    done = reconcile(after, 5, {T: frozenset([1, 2])}, free, {T: frozenset([1])})
    assert done.state is MemberState.STABLE and done.member_epoch == 5
    assert done.assigned == {T: frozenset([1, 2])} and done.pending_revocation == {}


def test_a_member_that_already_let_go_is_not_asked_to_revoke() -> None:
    after = reconcile(stable(4, 0, 1), 5, {T: frozenset([1])}, free, {T: frozenset([1])})
    assert after.state is MemberState.STABLE and after.member_epoch == 5
    assert after.assigned == {T: frozenset([1])}


def test_a_second_revocation_moves_the_epoch_on_by_one() -> None:
    revoking = reconcile(stable(4, 0, 1, 2), 5, {T: frozenset([1, 2])}, free, {T: frozenset([0, 1, 2])})
    again = reconcile(revoking, 6, {T: frozenset([2])}, free, {T: frozenset([1, 2])})
    assert again.state is MemberState.UNREVOKED_PARTITIONS and again.member_epoch == 5
    assert again.pending_revocation == {T: frozenset([1])}
