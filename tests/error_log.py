"""The kafkapy and asyncio errors logged while a fuzz test runs: a bad request must be answered,
never turned into a logged traceback."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


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
