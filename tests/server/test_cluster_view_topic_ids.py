"""ClusterView.topic_name, an index by topic id kept per topics snapshot, answers what a walk over
the view's topics answers, however the topics change between lookups."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.server.services import ClusterView
from kafkapy.store.base import TopicInfo
from kafkapy.store.persistent import PersistentMap

IDS = [uuid.UUID(int=n) for n in range(6)]
snapshots = st.dictionaries(st.sampled_from("abcdef"), st.sampled_from(IDS), max_size=6)


def plain(view: ClusterView, topic_id: uuid.UUID) -> str | None:
    return next((name for name, info in view.topics.items() if info.topic_id == topic_id), None)


@given(st.lists(st.tuples(snapshots, st.booleans()), min_size=1, max_size=8))
def test_topic_name_is_the_walk_over_the_topics(steps: list[tuple[dict[str, uuid.UUID], bool]]) -> None:
    view = ClusterView()
    for content, persistent in steps:
        # Distinct ids only, as topic ids are; a name may come back with another id (re-created).
        by_id = {topic_id: name for name, topic_id in sorted(content.items())}
        topics = {name: TopicInfo(name, topic_id, {0: (1,)}) for topic_id, name in by_id.items()}
        view.topics = PersistentMap(topics) if persistent else topics
        for topic_id in IDS:
            assert view.topic_name(topic_id) == plain(view, topic_id)
