"""Generators that pause between slices of long work (a Produce batch's walk, its inflation, an
answer's encoding), run to their end in a test."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

_T = TypeVar("_T")


def run_steps(steps: Generator[None, None, _T]) -> tuple[_T, int]:
    """What ``steps`` returns, and how many times it paused on the way."""
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, pauses
        pauses += 1
