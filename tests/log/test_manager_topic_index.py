"""LogManager's per-topic index (what topic config changes and topic deletes walk) stays equal to
a scan of its logs through any sequence of creates and deletes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.log import LogConfig
from kafkapy.log.manager import LogManager

TOPICS = ("a", "b", "c")
steps = st.lists(st.one_of(
    st.tuples(st.just("create"), st.sampled_from(TOPICS), st.integers(0, 3)),
    st.tuples(st.just("delete_partition"), st.sampled_from(TOPICS), st.integers(0, 3)),
    st.tuples(st.just("delete_topic"), st.sampled_from(TOPICS), st.just(0)),
    st.tuples(st.just("configure"), st.sampled_from(TOPICS), st.integers(1, 10_000)),
), max_size=40)


@given(steps)
def test_the_topic_index_matches_the_logs(script: list[tuple[str, str, int]]) -> None:
    logs = LogManager()
    flush_ms = dict.fromkeys(TOPICS, LogConfig().flush_ms)  # the model: each topic's last config
    for action, topic, number in script:
        if action == "create":
            logs.get_or_create(topic, number, LogConfig(flush_ms=flush_ms[topic]))
        elif action == "delete_partition":
            existed = (topic, number) in logs.logs
            assert logs.delete_partition(topic, number) is existed
        elif action == "delete_topic":
            had = sorted(p for t, p in logs.logs if t == topic)
            assert logs.delete_topic(topic) == had
        else:
            flush_ms[topic] = number
            logs.set_topic_config(topic, LogConfig(flush_ms=number))
        assert logs.topics() == sorted({t for t, _ in logs.logs})
        for (t, _), log in logs.logs.items():
            assert log.config.flush_ms == flush_ms[t]  # a config change reached every log of its topic
    logs.close()
