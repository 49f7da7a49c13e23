"""Helpers for the metadata store tests: waiting for asynchronous watch callbacks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kafkapy.store import BrokerRegistration, RegisteredEndpoint
from kafkapy.testing import wait_until  # noqa: F401  (re-exported for the tests here)

TIMEOUT = 10.0


class Recorder:
    """A watch callback that remembers every call (its arguments; one argument unwrapped)."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, *args: Any) -> None:
        with self._cond:
            self.calls.append(args[0] if len(args) == 1 else args)
            self._cond.notify_all()

    @property
    def last(self) -> Any:
        with self._cond:
            return self.calls[-1] if self.calls else None

    def wait_for(self, predicate: Callable[[Any], bool], timeout: float = TIMEOUT) -> Any:
        """Wait until the latest call satisfies ``predicate``; return its value."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self.calls) and predicate(self.calls[-1]), timeout):
                raise AssertionError(f"watch never saw the expected state; calls: {self.calls!r}")
            return self.calls[-1]

    def wait_count(self, count: int, timeout: float = TIMEOUT) -> list[Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.calls) >= count, timeout):
                raise AssertionError(f"expected {count} watch calls, got {self.calls!r}")
            return list(self.calls)


def registration(broker_id: int, port: int = 9092, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id,
        (RegisteredEndpoint("PLAINTEXT", "PLAINTEXT", "localhost", port + broker_id),
         RegisteredEndpoint("SECURE", "SSL", "broker.example", port + 100 + broker_id)),
        rack,
        {"metadata.version": (1, 7)},
    )


def expire_session(store: Any, connect: str) -> None:
    """Expire a ZooKeeperStore's session for real: a second client takes it over and closes it."""
    from kazoo.client import KazooClient

    session_id, password = store.client.client_id
    thief = KazooClient(hosts=connect, client_id=(session_id, password))
    thief.start(timeout=10)
    thief.stop()
    thief.close()
