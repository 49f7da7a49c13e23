"""A benchmark's helper process: a spawned child spoken to over a pipe.

Benchmarks that measure servers put the server and the load generator in
processes of their own, so that on two cores neither steals the other's time
inside one interpreter.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

__all__ = ["ChildProcess"]


class ChildProcess:
    """``target(pipe, *args)`` in a spawned process; ``ask`` sends a message and awaits the answer."""

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=target, args=(child, *args), daemon=True)
        self.process.start()
        child.close()

    def ask(self, message: Any, timeout: float = 600) -> Any:
        """Send ``message`` and return the answer; an exception the child sends back is raised here."""
        self.pipe.send(message)
        result = self.receive(timeout)
        if isinstance(result, Exception):
            raise result
        return result

    def receive(self, timeout: float = 600) -> Any:
        if not self.pipe.poll(timeout):
            raise RuntimeError(f"{self.process.name} did not answer within {timeout} s")
        return self.pipe.recv()

    def stop(self, message: Any = "stop") -> None:
        if self.process.is_alive():
            try:
                self.pipe.send(message)
            except (BrokenPipeError, OSError):
                pass
        self.process.join(timeout=20)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
