"""Fault rules on a whole in-process cluster: ``cluster.faults`` (and ``kafka_faults`` beside
``kafka_cluster``) installs a rule on every running broker, as the control endpoint does.

Why: a client of a cluster talks to every broker (the leaders of its partitions, its group's
coordinator), so a rule on one broker fails only the requests that happen to reach it, and a
test that meant "every Produce fails twice" sees none fail. Each broker keeps its own copy of the
rule (``times``, ``every`` and the RNG count per broker, as on the control endpoint); the handle
sums what they matched and fired. Brokers started after the rule was added do not get it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from kafkapy.faults.injector import FaultHandle, Faults, scoped
from kafkapy.faults.rules import FaultRule

__all__ = ["ClusterFaults", "FaultRules", "RuleHandle", "SpreadHandle"]


class RuleHandle(Protocol):
    """What a test reads of an installed rule, on one broker or on a cluster."""

    @property
    def rule(self) -> FaultRule: ...

    @property
    def matched(self) -> int: ...

    @property
    def fired(self) -> int: ...

    @property
    def when_errors(self) -> int: ...

    @property
    def removed(self) -> bool: ...

    def remove(self) -> None: ...


class FaultRules(Protocol):
    """``broker.faults``: one broker's rules (kafkapy.faults.Faults) or a cluster's (ClusterFaults)."""

    def add(self, rule: FaultRule) -> RuleHandle: ...

    def injected(self, rule: FaultRule) -> AbstractContextManager[RuleHandle]: ...

    def clear(self) -> None: ...


class SpreadHandle:
    """A rule installed on several brokers: its handle on each, counted together."""

    def __init__(self, rule: FaultRule, handles: Sequence[FaultHandle]) -> None:
        self.rule = rule
        self.handles = tuple(handles)

    @property
    def matched(self) -> int:
        return sum(handle.matched for handle in self.handles)

    @property
    def fired(self) -> int:
        return sum(handle.fired for handle in self.handles)

    @property
    def when_errors(self) -> int:
        return sum(handle.when_errors for handle in self.handles)

    @property
    def removed(self) -> bool:
        return all(handle.removed for handle in self.handles)

    def remove(self) -> None:
        """Uninstall the rule from every broker it went to (again: nothing)."""
        for handle in self.handles:
            handle.remove()

    def __repr__(self) -> str:
        return f"SpreadHandle({self.rule!r}, brokers={len(self.handles)}, matched={self.matched}, " \
               f"fired={self.fired})"


class ClusterFaults:
    """The fault rules of a cluster's running brokers (``members()``, asked at each call)."""

    def __init__(self, members: Callable[[], Sequence[Faults]]) -> None:
        self._members = members

    def add(self, rule: FaultRule) -> SpreadHandle:
        """Install ``rule`` on every running broker; from any thread."""
        handles: list[FaultHandle] = []
        try:
            for faults in self._members():
                handles.append(faults.add(rule))
        except BaseException:  # a rule that is not one, say: no broker keeps half of it
            for handle in handles:
                handle.remove()
            raise
        return SpreadHandle(rule, handles)

    def injected(self, rule: FaultRule) -> AbstractContextManager[SpreadHandle]:
        """``with cluster.faults.injected(rule) as handle:``: on every broker, inside the block only."""
        return scoped(self.add, rule)

    def clear(self) -> None:
        """Remove every rule of every running broker (those added to one broker alone too)."""
        for faults in self._members():
            faults.clear()

    @property
    def handles(self) -> tuple[FaultHandle, ...]:
        """Every running broker's installed rules, broker by broker."""
        return tuple(handle for faults in self._members() for handle in faults.handles)
