"""The embedded in-memory metadata store. Several Brokers in one process that
share one MemoryStore form a cluster; it is thread-safe because each embedded
broker runs its own event loop in its own thread."""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Mapping

import attrs

from kafkapy.errors import KafkaPyError

__all__ = ["BrokerRegistration", "MemoryStore", "RegisteredEndpoint", "StoreError", "new_cluster_id"]


class StoreError(KafkaPyError):
    """The store refused an operation (e.g. a broker id already registered)."""


def new_cluster_id() -> str:
    """A random UUID as Kafka prints it: URL-safe base64 without padding, 22 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@attrs.frozen
class RegisteredEndpoint:
    listener: str
    security_protocol: str
    host: str
    port: int


@attrs.frozen
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[RegisteredEndpoint, ...]
    rack: str | None = None
    features: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)

    def endpoint(self, listener: str) -> RegisteredEndpoint | None:
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return None


class MemoryStore:
    def __init__(self, cluster_id: str | None = None) -> None:
        self._lock = threading.Lock()
        self._cluster_id = cluster_id or new_cluster_id()
        self._brokers: dict[int, BrokerRegistration] = {}
        self._controller: int | None = None
        self._next_generated_id: int | None = None

    def cluster_id(self) -> str:
        return self._cluster_id

    def allocate_broker_id(self, reserved_max: int) -> int:
        """Kafka's broker.id=-1: generated ids start above reserved.broker.max.id."""
        with self._lock:
            candidate = self._next_generated_id or reserved_max + 1
            while candidate in self._brokers:
                candidate += 1
            self._next_generated_id = candidate + 1
            return candidate

    def register_broker(self, registration: BrokerRegistration) -> None:
        with self._lock:
            if registration.broker_id in self._brokers:
                raise StoreError(f"broker id {registration.broker_id} is already registered in this cluster")
            self._brokers[registration.broker_id] = registration
            if self._controller is None:
                self._controller = registration.broker_id  # the first to register wins, as with /controller

    def unregister_broker(self, broker_id: int) -> None:
        with self._lock:
            self._brokers.pop(broker_id, None)
            if self._controller == broker_id:
                self._controller = min(self._brokers) if self._brokers else None

    def brokers(self) -> list[BrokerRegistration]:
        with self._lock:
            return sorted(self._brokers.values(), key=lambda b: b.broker_id)

    def controller_id(self) -> int:
        return -1 if self._controller is None else self._controller
