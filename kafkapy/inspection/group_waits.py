"""What ``broker.wait_for_group`` waits for, and the clients it polls meanwhile.

A group test waits for its consumers to join before it produces or asserts: a group in a state
(Kafka's names, classic or KIP-848) with a number of members. Some clients make progress only
while the test calls them: confluent-kafka (librdkafka) hands a consumer its assignment inside
``poll()``, and kafka-python joins, syncs and heartbeats only inside ``poll()``, so a test that
waits without polling them waits for ever. ``poll=`` names what to call between two looks at
the group. aiokafka's consumers join from their own tasks and need nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from kafkapy.groups.consumer_group import GroupState as ConsumerGroupState
from kafkapy.groups.state import GroupState as ClassicGroupState
from kafkapy.inspection.groups import GroupView

__all__ = ["GROUP_STATES", "POLL_S", "GroupWanted", "pollers", "seen_group"]

# The states a live group can be waited for in: classic and KIP-848 (Dead is a group that is gone:
# broker.group() is None then).
GROUP_STATES: tuple[str, ...] = tuple(dict.fromkeys(
    state.value for kind in (ClassicGroupState, ConsumerGroupState) for state in kind
    if state.value != "Dead"))
POLL_S = 0.05  # each consumer polled between two looks: long enough for a rebalance callback to run
Poller = Callable[[], object]


@attrs.frozen
class GroupWanted:
    """A group ``group_id`` in ``state`` (None: any) with ``members`` members (None: any number)."""

    group_id: str
    state: str | None
    members: int | None

    def __attrs_post_init__(self) -> None:
        if self.state is not None and self.state not in GROUP_STATES:
            raise ValueError(f"state must be one of {', '.join(GROUP_STATES)} (Kafka's names) or None, "
                             f"not {self.state!r}")
        if self.members is not None and (isinstance(self.members, bool) or not isinstance(self.members, int)
                                         or self.members < 0):
            raise ValueError(f"members must be a count of at least 0 or None, not {self.members!r}")

    def met(self, view: GroupView | None) -> bool:
        return view is not None and (self.state is None or view.state == self.state) \
            and (self.members is None or len(view.members) == self.members)

    def __str__(self) -> str:
        wanted = [f"in state {self.state}"] if self.state is not None else []
        if self.members is not None:
            wanted.append(f"with {self.members} member(s)")
        return f"group {self.group_id!r}" + (" " + " and ".join(wanted) if wanted else " to exist")


def seen_group(view: GroupView | None) -> str:
    """What a timed-out wait last saw, in a line: state, generation and each member's client id and
    assignment (a GroupView's repr, offsets and all, buries them)."""
    if view is None:
        return "no coordinator knows the group"
    members = "; ".join(f"{m.client_id} ({m.member_id}) assigned "
                        + (", ".join(f"{topic}{list(parts)}" for topic, parts in m.assignment.items())
                           or "nothing")
                        for m in view.members)
    return (f"{view.kind} group in state {view.state}, generation {view.generation}, coordinator "
            f"{view.coordinator}, {len(view.members)} member(s)" + (f": {members}" if members else ""))


def pollers(poll: Iterable[Any] | Any) -> list[Poller]:
    """Each of ``poll`` (one, or an iterable of them) as a call: a consumer with ``poll()`` is
    polled for POLL_S (kafka-python's takes milliseconds, confluent-kafka's seconds), and what it
    returns is dropped; any other callable is called as it is. TypeError for anything else."""
    if callable(poll) or hasattr(poll, "poll"):
        items = [poll]
    elif isinstance(poll, Iterable) and not isinstance(poll, (str, bytes)):
        items = list(poll)
    else:
        raise TypeError(f"poll takes a consumer, a callable or an iterable of them, not {poll!r}")
    calls: list[Poller] = []
    for item in items:
        method = getattr(item, "poll", None)
        if callable(method):
            if type(item).__module__.partition(".")[0] == "kafka":  # kafka-python: poll(timeout_ms)
                calls.append(functools.partial(method, timeout_ms=int(POLL_S * 1000)))
            else:  # confluent-kafka's Consumer, and any poll(seconds)
                calls.append(functools.partial(method, POLL_S))
        elif callable(item):
            calls.append(item)
        else:
            raise TypeError(f"poll takes consumers (with a poll() method) or callables, not "
                            f"{type(item).__name__}: {item!r}")
    return calls
