"""Stepped work: a generator that yields between two slices of long work (a record walk, an
inflation, an answer's encoding, a state partition's replay) and returns the result. The event
loop runs one a slice at a time (kafkapy.server.slices); everything else, and the plain paths
that need no pause, run it here in one go."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar, cast

__all__ = ["all_at_once"]

_T = TypeVar("_T")


def all_at_once(steps: Generator[None, None, _T]) -> tuple[_T, int]:
    """Run ``steps`` to its end without letting anything in between: what it returns, and how
    many times it yielded."""
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(_T, done.value), yields
        yields += 1
