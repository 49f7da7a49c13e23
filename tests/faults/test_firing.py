"""How often a rule fires, and which topics and partitions a request names (no broker needed)."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.faults import Delay, FaultHandle, FaultRule, named_partitions


def fired_at(rule: FaultRule, matches: int) -> list[int]:
    handle = FaultHandle(None, rule)  # type: ignore[arg-type]  # remove() is not called here
    return [i for i in range(1, matches + 1) if handle._fires()]


@given(st.integers(1, 5), st.one_of(st.none(), st.integers(1, 5)), st.integers(0, 30))
def test_every_and_times(every: int, times: int | None, matches: int) -> None:
    expected = [i for i in range(1, matches + 1) if i % every == 0][:times]
    assert fired_at(FaultRule(Delay(0), every=every, times=times), matches) == expected


@given(st.integers(0, 2**32), st.floats(0.05, 0.95))
def test_probability_is_a_function_of_the_seed(seed: int, probability: float) -> None:
    rule = FaultRule(Delay(0), probability=probability, seed=seed)
    first = fired_at(rule, 200)
    assert first == fired_at(rule, 200)
    assert 0 < len(first) < 200  # 200 draws at 5%..95%: all or none would be a broken RNG use


def test_probability_bounds() -> None:
    assert fired_at(FaultRule(Delay(0), probability=0.0), 50) == []
    assert fired_at(FaultRule(Delay(0), probability=1.0), 5) == [1, 2, 3, 4, 5]


def test_named_partitions_across_request_shapes() -> None:
    topic_id = uuid.uuid4()

    def named(body: dict[str, Any]) -> set[tuple[str, int | None]]:
        return set(named_partitions(body, {topic_id: "by-id"}.get))
    assert named({"topic_data": [{"name": "p", "partition_data": [{"index": 1}, {"index": 2}]}]}) == {
        ("p", 1), ("p", 2)}  # Produce
    assert named({"topics": [{"topic_id": topic_id, "partitions": [{"partition": 0}]}],
                  "forgotten_topics_data": []}) == {("by-id", 0)}  # Fetch v13+
    assert named({"topics": [{"topic_id": uuid.uuid4(), "partitions": [{"partition": 0}]}]}) == set()
    assert named({"groups": [{"group_id": "g", "topics": [{"name": "o", "partition_indexes": [3]}]}]}) == {
        ("o", 3)}  # OffsetFetch v8+
    assert named({"topic_names": ["a", "b"]}) == {("a", None), ("b", None)}  # DeleteTopics v0-v5
    assert named({"topics": [{"name": "m"}]}) == {("m", None)}  # Metadata
    assert named({"group_id": "g", "protocols": [{"name": "range"}]}) == set()  # JoinGroup: no topic
