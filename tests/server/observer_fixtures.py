"""Observer classes the broker loads by dotted path (``observer_fixtures.RecordingObserver``).

pytest puts tests/server on sys.path (tests are not a package), and the test
modules insert it too, so the broker can import this module by name.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar


class RecordingObserver:
    """Records every call; instances register themselves so tests can find them."""

    instances: ClassVar[list[RecordingObserver]] = []

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.configs: dict[str, Any] | None = None
        self.requests: list[tuple[Any, ...]] = []
        self.responses: list[tuple[Any, ...]] = []
        self.closed_with: list[float] = []
        self.mutation_errors: list[str] = []
        RecordingObserver.instances.append(self)

    def configure(self, configs: dict[str, Any]) -> None:
        self.configs = dict(configs)

    def record_request(self, request: Any, client_address: str, principal: str, api_key: int,
                       api_version: int, correlation_id: int) -> None:
        with self.lock:
            self.requests.append((request, client_address, principal, api_key, api_version, correlation_id))
        if request is not None:
            self._try_to_mutate(request)

    def record_response(self, response: Any, api_version: int, correlation_id: int) -> None:
        with self.lock:
            self.responses.append((response, api_version, correlation_id))
        if response is not None:
            self._try_to_mutate(response)

    def close(self, timeout: float) -> None:
        self.closed_with.append(timeout)

    def _try_to_mutate(self, struct: Any) -> None:
        """Every way of changing the struct must fail; record the ones that did not."""
        attempts = {
            "setitem": lambda: struct.__setitem__("injected", 1),
            "setattr": lambda: setattr(struct, "injected", 1),
            "delitem": lambda: struct.__delitem__(next(iter(struct))),
            "update": lambda: struct.update({"injected": 1}),
        }
        for name, value in struct.items():
            if isinstance(value, tuple) and value and hasattr(value[0], "items"):
                attempts[f"nested {name}"] = lambda v=value: v[0].__setitem__("injected", 1)
            if isinstance(value, (list, dict, set, bytearray)):
                attempts[f"mutable {name}"] = lambda: None
        for name, attempt in attempts.items():
            try:
                attempt()
            except (TypeError, AttributeError, KeyError):
                continue
            with self.lock:
                self.mutation_errors.append(name)


class RaisingObserver:
    """Fails in every method after construction."""

    instances: ClassVar[list[RaisingObserver]] = []

    def __init__(self) -> None:
        self.calls = 0
        RaisingObserver.instances.append(self)

    def configure(self, configs: dict[str, Any]) -> None:
        pass

    def record_request(self, *args: Any) -> None:
        self.calls += 1
        raise RuntimeError("observer boom (request)")

    def record_response(self, *args: Any) -> None:
        self.calls += 1
        raise RuntimeError("observer boom (response)")

    def close(self, timeout: float) -> None:
        raise RuntimeError("observer boom (close)")


class RejectingObserver:
    def configure(self, configs: dict[str, Any]) -> None:
        raise ValueError("no thanks")

    def record_request(self, *args: Any) -> None:
        pass

    def record_response(self, *args: Any) -> None:
        pass

    def close(self, timeout: float) -> None:
        pass


TIMELINE: list[tuple[Any, ...]] = []  # one ordered log that observers, hooks and interceptors all write


class TimelineObserver:
    """Writes every call, raw frames included, onto TIMELINE, so a test can check its order
    against the module hooks and interceptors that write there too."""

    def configure(self, configs: dict[str, Any]) -> None:
        pass

    def record_request(self, request: Any, client_address: str, principal: str, api_key: int,
                       api_version: int, correlation_id: int) -> None:
        TIMELINE.append(("observer.request", api_key, correlation_id, request))

    def record_response(self, response: Any, api_version: int, correlation_id: int) -> None:
        TIMELINE.append(("observer.response", correlation_id, response))

    def record_frame(self, connection: Any, from_client: bool, frame: bytes) -> None:
        TIMELINE.append(("observer.frame", "in" if from_client else "out", frame))

    def close(self, timeout: float) -> None:
        pass
