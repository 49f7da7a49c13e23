"""pytest fixtures for an in-process kafkapy broker (registered as the ``kafkapy`` pytest plugin).

Installing kafkapy makes two fixtures available to every test suite:

``kafka_broker``
    A fresh, started :class:`kafkapy.Broker` per test on an ephemeral
    ``PLAINTEXT://127.0.0.1:0`` listener; connect with ``kafka_broker.bootstrap_servers``.

``kafka_broker_factory``
    A callable that starts a broker per call with the configuration given and
    returns it; every broker it started is stopped when the test ends. Broker
    configuration keys contain dots, so pass them either as a mapping or as
    keyword arguments with ``_`` standing for ``.``::

        broker = kafka_broker_factory({"broker.id": 7, "tag.rack-zone": "a"})
        broker = kafka_broker_factory(broker_id=7, advertise_private_api_keys=False)

    Keyword arguments win over the mapping. A key that itself needs an
    underscore (``tag.my_tag``) can only be given in the mapping.

Both run the broker on a background thread (``with Broker(...)``), so blocking
clients such as kafka-python can talk to it from the test's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import pytest

from kafkapy.embedded import Broker

__all__ = ["BrokerFactory", "config_from_kwargs", "kafka_broker", "kafka_broker_factory", "wait_until"]


class BrokerFactory(Protocol):
    def __call__(self, config: Mapping[str, Any] | None = None, /, **settings: Any) -> Broker: ...


def config_from_kwargs(config: Mapping[str, Any] | None = None, /, **settings: Any) -> dict[str, Any]:
    """Merge a mapping of broker settings with keyword settings whose ``_`` stand for ``.``."""
    merged = dict(config or {})
    merged.update({name.replace("_", "."): value for name, value in settings.items()})
    return merged


@pytest.fixture
def kafka_broker_factory() -> Iterator[BrokerFactory]:
    """Start brokers on demand: ``factory(config_dict)`` or ``factory(broker_id=7)``; all stop at teardown."""
    started: list[Broker] = []

    def factory(config: Mapping[str, Any] | None = None, /, **settings: Any) -> Broker:
        broker = Broker(config_from_kwargs(config, **settings))
        broker.__enter__()
        started.append(broker)
        return broker

    try:
        yield factory
    finally:
        errors: list[BaseException] = []
        for broker in reversed(started):
            try:
                broker.close()
            except BaseException as exc:  # stop the others before reporting
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def kafka_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    """A started broker with the embedded defaults, stopped after the test."""
    return kafka_broker_factory()


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail the test with
    an AssertionError naming ``what`` after ``timeout`` seconds. For cluster state that settles
    asynchronously (watches, elections, rebalances)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)
