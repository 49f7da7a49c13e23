"""Fuzzing the topic names a capture teaches: rows of the messages that pair ids with names and of
those that carry ids alone, their bodies any JSON (names with quotes, escapes and any character;
ids known, unknown, Kafka's zero id, or not strings; a custom decoder's text that is not JSON),
give rows whose bodies are still JSON, each known id named beside it, never an exception."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kafkapy.capture.rows import COLUMNS
from kafkapy.capture.topic_names import _API_KEY, _API_VERSION, _ERRORS, _REQUEST, _RESPONSE, TopicNames
from kafkapy.protocol.topic_ids import ZERO_ID, topic_id_messages, topic_id_shape

_IDS = st.sampled_from(["6f1c4f5e-3a2b-4c1d-9e8f-0123456789ab", "0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d",
                        ZERO_ID, "6f1c4f5e", '6f1c4f5e-3a2b-4c1d-9e8f-0123456789a"'])
_NAMES = st.text(max_size=5) | st.sampled_from(['"', "\\", "\u2028", "orders"])
_SCALARS = st.none() | st.integers(-1, 3) | _NAMES
_BODIES = st.recursive(
    st.fixed_dictionaries({"topic_id": _IDS | _SCALARS},
                          optional={"name": _NAMES | st.none(), "x": _SCALARS}),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["topics", "responses", "x"]),
                                                                inner, max_size=2), max_leaves=8)
_MESSAGES = sorted(topic_id_messages())


def _text(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)  # as the rows write bodies


def _ids_named(value: Any, names: dict[str, str]) -> bool:
    """Whether every dict's known topic_id has its name beside it (an id as the rows write one: a
    UUID's 36 characters; a custom decoder's other text may teach a name, but is never named)."""
    if isinstance(value, list):
        return all(_ids_named(item, names) for item in value)
    if isinstance(value, dict):
        topic_id = value.get("topic_id")
        if isinstance(topic_id, str) and len(topic_id) == 36 and topic_id in names and \
                value.get("topic_name") != names[topic_id]:
            return False
        return all(_ids_named(item, names) for item in value.values())
    return True


_ERROR_ENTRIES = st.none() | st.lists(st.fixed_dictionaries({"topic_id": _IDS | _SCALARS}), max_size=2)


@settings(max_examples=300)
# an id shorter than a UUID (a custom decoder's) hid the next one from the search
@example([((3, 10), None, '[{"topic_id":"0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d","name":"t"}]', None),
          ((0, 13), '{"topics":[{"topic_id":"6f1c4f5e"},'
                    '{"topic_id":"0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d"}]}', None, None)])
@given(st.lists(st.tuples(st.sampled_from(_MESSAGES), _BODIES.map(_text) | st.text(max_size=8) | st.none(),
                          _BODIES.map(_text) | st.none(), _ERROR_ENTRIES), max_size=6))
def test_rows_stay_json_and_known_ids_are_named(rows: list[tuple[tuple[int, int], str | None, str | None,
                                                                  list[dict[str, Any]] | None]]) -> None:
    topics = TopicNames()
    handlers = topics.handlers()
    for (api_key, version), request, response, errors in rows:
        values: list[Any] = [None] * len(COLUMNS)
        values[_API_KEY], values[_API_VERSION] = api_key, version
        values[_REQUEST], values[_RESPONSE], values[_ERRORS] = request, response, errors
        out = handlers[(api_key, version)](tuple(values))
        for at, kind in ((_REQUEST, "request"), (_RESPONSE, "response")):
            if out[at] != values[at]:
                assert topic_id_shape(api_key, kind, version) == "ids"
            try:
                json.loads(values[at])
            except (TypeError, ValueError):
                continue  # none, or a custom decoder's text: passed on, never read as JSON
            if topic_id_shape(api_key, kind, version) == "ids":
                assert _ids_named(json.loads(out[at]), topics.names)
