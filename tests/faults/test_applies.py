"""The fault injector's ``applies`` filter held to its promise.

``applies`` False lets the dispatcher skip the injector for a request (kafkapy.server.interceptors),
so it must only say False where ``before`` would have passed with no effect: no rule matched (no
``matched`` counted, none fired) and no mute pending. Hypothesis draws rule sets and requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.faults import Delay, FaultRule
from kafkapy.faults.injector import _MUTED_UNTIL, FaultInjector, Faults
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.modules import RequestContext

APIS = [ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.DELETE_TOPICS, ApiKey.API_VERSIONS]
TOPICS = ["a", "b"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


rules = st.builds(
    FaultRule, st.just(Delay(0)),
    api=st.one_of(st.none(), st.sampled_from(APIS), st.sets(st.sampled_from(APIS), min_size=1, max_size=3)),
    versions=st.one_of(st.none(), st.tuples(st.integers(0, 5), st.integers(5, 12))),
    client_id=st.one_of(st.none(), st.sampled_from(["c1", "c2"])),
    topic=st.one_of(st.none(), st.sampled_from(TOPICS)),
    every=st.integers(1, 2))


def _context(api: int, version: int, client_id: str, muted: bool) -> RequestContext:
    info = ConnectionInfo(id="c-1", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                          client_address=("127.0.0.1", 1), broker_address=("127.0.0.1", 2))
    if muted:
        info.attributes[_MUTED_UNTIL] = 0.0
    return RequestContext(info, api, version, 1, client_id)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rules, min_size=1, max_size=4), st.sampled_from(APIS), st.integers(0, 12),
       st.sampled_from(["c1", "c2"]), st.sampled_from(TOPICS), st.booleans())
def test_a_request_the_injector_does_not_apply_to_matches_no_rule(
        broker: Broker, drawn: list[FaultRule], api: int, version: int, client_id: str, topic: str,
        muted: bool) -> None:
    faults: Faults = broker.faults
    handles = [faults.add(rule) for rule in drawn]
    try:
        injector = FaultInjector(faults)
        context = _context(api, version, client_id, muted)
        body: dict[str, Any] = {"topic_data": [{"name": topic, "partition_data": [{"index": 0}]}]}
        request = Request(api, version, 1, client_id, body)
        applies = injector.applies(context)
        assert applies == (any(rule.api is None or api in rule.api for rule in drawn) or muted)
        if not applies:
            assert faults.firing(context, request) is None
            assert [h.matched for h in handles] == [0] * len(handles)
    finally:
        faults.clear()
    assert not faults.api_keys and not faults.every_api  # the index empties with the rules
