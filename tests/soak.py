"""The "soak" Hypothesis profile: every fuzz and model test with KAFKAPY_SOAK_FACTOR (20 unless set)
times its own example count and no deadline, for the occasional long run (docs/testing.md,
"Soaking the fuzz and model tests"). Chosen with `--hypothesis-profile soak` or
KAFKAPY_HYPOTHESIS_PROFILE=soak; never on by default: CI runs each test's own count."""

from __future__ import annotations

import os

from hypothesis import settings

SOAK_FACTOR = int(os.environ.get("KAFKAPY_SOAK_FACTOR", "20"))
settings.register_profile("soak", max_examples=100 * SOAK_FACTOR, deadline=None)


def soaking() -> bool:
    """Whether the soak profile is the one loaded."""
    return settings.default.max_examples == settings.get_profile("soak").max_examples


def soaked(own: settings) -> settings:
    """`own` as it should run now: unchanged by default; under the soak profile, SOAK_FACTOR times
    its examples and no deadline. A test with no example count of its own already inherits the
    profile's (soaked) one, so it is not multiplied again."""
    if not soaking() or own.max_examples == settings.default.max_examples:
        return own
    return settings(own, max_examples=own.max_examples * SOAK_FACTOR, deadline=None)
