"""A client instance's pacing (Kafka's ClientMetricsInstance), over generated request sequences:
what it accepts keeps the push interval, except the first push after an accepted ask."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.telemetry.module import _Instance
from kafkapy.telemetry.subscriptions import ClientAttributes

INTERVAL_MS = 100


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["get", "push"]), st.integers(0, 250)), max_size=40))
def test_accepted_requests_keep_the_interval(steps: list[tuple[str, int]]) -> None:
    instance = _Instance(ClientAttributes(uuid.UUID(int=5), "c", "127.0.0.1", 1), 0, ("*",), INTERVAL_MS, 7)
    now = 0
    last_get = last_push = None
    asked_since_push = False
    for kind, gap in steps:
        now += gap
        if kind == "get":
            accepted = instance.may_get(now)
            last = max((t for t in (last_get, last_push) if t is not None), default=None)
            # An ask is taken when nothing was taken within the interval before it.
            assert accepted == (last is None or now - last >= INTERVAL_MS)
            if accepted:
                last_get, asked_since_push = now, True
        else:
            accepted = instance.may_push(now)
            # A push is taken right after an accepted ask, else only an interval after the last.
            assert accepted == (asked_since_push or last_push is None or now - last_push >= INTERVAL_MS)
            if accepted:
                last_push, asked_since_push = now, False
