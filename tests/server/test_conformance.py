"""conforms(): isinstance against a runtime-checkable protocol, answered once per class."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kafkapy.server.conformance import conforms
from kafkapy.server.txn_coordinator import TransactionCoordinatorLocator


@runtime_checkable
class Greets(Protocol):
    def greet(self) -> str: ...


class Greeter:
    def greet(self) -> str:
        return "hello"


class Silent:
    pass


def test_conforms_answers_as_isinstance_for_each_class_and_protocol() -> None:
    for obj in (Greeter(), Silent(), None, 3, Greeter()):
        for protocol in (Greets, TransactionCoordinatorLocator):
            assert conforms(obj, protocol) == isinstance(obj, protocol)
            assert conforms(obj, protocol) == isinstance(obj, protocol)  # the kept answer too
