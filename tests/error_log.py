"""The kafkapy and asyncio errors logged while a fuzz test runs: a bad request must be answered,
never turned into a logged traceback."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest


class ErrorCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(("kafkapy", "asyncio")):
            self.messages.append(f"{record.name}: {record.getMessage()}")


@contextlib.contextmanager
def collected_errors() -> Iterator[ErrorCollector]:
    collector = ErrorCollector()
    logging.getLogger().addHandler(collector)
    try:
        yield collector
    finally:
        logging.getLogger().removeHandler(collector)


@pytest.fixture(scope="module")
def errors() -> Iterator[ErrorCollector]:
    """The errors logged while a test module runs (its module-scoped broker's included): a plugin
    fixture (tests/conftest.py's pytest_plugins), so each fuzz module need not define it."""
    with collected_errors() as collector:
        yield collector
