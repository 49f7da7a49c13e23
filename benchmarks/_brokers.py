"""The broker processes benchmarks measure against: librdkafka's mock cluster, and what every
broker process answers over its pipe.

Each broker runs in a process of its own (``benchmarks._processes.ChildProcess``), so on two
cores no party steals time inside another's interpreter. The mock cluster is owned by a
confluent-kafka client (``test.mock.num.brokers=1``); its bootstrap address is the one broker
listed in that client's metadata.
"""

from __future__ import annotations

import multiprocessing.connection
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["answer", "serve_mock"]

MOCK_TIMEOUT_S = 60.0  # for the owner's first metadata, which brings the mock up


def _rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def answer(pipe: multiprocessing.connection.Connection,
           commands: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """Serve "rss" (this process's resident bytes), "cpu" (its CPU seconds, all threads) and the
    benchmark's own ``commands`` (a tuple message ``(name, *arguments)``, answered with what the
    command returns) until "stop"; anything else gets a ValueError back."""
    commands = commands or {}
    while True:
        message = pipe.recv()
        if message == "stop":
            return
        if message == "rss":
            pipe.send(_rss())
        elif message == "cpu":
            pipe.send(time.process_time())
        elif isinstance(message, tuple) and message and message[0] in commands:
            pipe.send(commands[message[0]](*message[1:]))
        else:
            pipe.send(ValueError(f"unknown message {message!r}"))


def serve_mock(pipe: multiprocessing.connection.Connection, timeout_s: float = MOCK_TIMEOUT_S) -> None:
    """librdkafka's mock cluster: sends its bootstrap address, then ``answer``s until "stop"."""
    import confluent_kafka

    owner = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 0})
    (broker,) = owner.list_topics(timeout=timeout_s).brokers.values()
    pipe.send(f"{broker.host}:{broker.port}")
    answer(pipe)
