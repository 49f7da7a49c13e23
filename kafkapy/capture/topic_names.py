"""Topic names for the rows whose messages name topics by id (Fetch v13+, OffsetCommit v10+, ...).

Theory of operation: a capture usually holds, before the traffic that names topics by id, the
Metadata (v10+), CreateTopics or DescribeTopicPartitions answers that pair each id with its
name (:mod:`kafkapy.protocol.topic_ids`). One :class:`TopicNames` per capture file learns those
pairs from the rows as they come out, and gives each later row of a message that carries ids
alone what it knows:

* its request and response bodies a ``topic_name`` beside each ``topic_id`` it knows;
* its ``topics`` the names of the ids its request carries (so ``--topic`` finds it);
* its ``errors`` entries a ``topic`` beside their ``topic_id``.

Rows are streamed, so a name learnt later in the file does not reach rows already written:
resolving them would mean holding every row of the file back until its end. A topic id is
Kafka's random UUID, never reused (a topic made again gets a new one), so one map serves every
connection and broker of a capture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkapy.protocol.topic_ids import add_topic_names, named_topic_ids, topic_id_messages, topic_id_shape

__all__ = ["TopicNames"]

# positions in kafkapy.capture.rows.COLUMNS (a test holds them to it)
_API_KEY, _API_VERSION, _REQUEST, _RESPONSE, _ERRORS, _TOPICS = 4, 6, 9, 10, 12, 18
# Names kept per capture: far more topics than any cluster has (Kafka's own tests go to 10^5);
# past it a hostile capture stops teaching, and ids already known still resolve.
MAX_NAMES = 1_000_000


class TopicNames:
    """The topic id -> name map of one capture, and its use on the rows (value tuples in
    :data:`kafkapy.capture.rows.COLUMNS` order)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def handlers(self) -> dict[tuple[int, int], Callable[[tuple[Any, ...]], tuple[Any, ...]]]:
        """What :func:`kafkapy.capture.rows.decode_capture_values` calls on a row, by API key and
        version: :meth:`row` for each message version with topic ids (Fetch v13+, not v12)."""
        return dict.fromkeys(topic_id_messages(), self.row)

    def row(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """One row with what the map knows added, or learnt from."""
        api_key, version = values[_API_KEY], values[_API_VERSION]
        row: list[Any] | None = None  # a copy of the values, made once something changes
        for kind, at in (("request", _REQUEST), ("response", _RESPONSE)):
            text = values[at]
            if text is None:
                continue
            shape = topic_id_shape(api_key, kind, version)
            if shape == "named":
                self._learn(text)
            elif shape == "ids" and self.names:
                row = row or list(values)
                row[at], found = add_topic_names(text, self.names)
                if kind == "request":
                    topics = row[_TOPICS] = list(row[_TOPICS] or ())
                    topics.extend(n for n in found if n not in topics)
                else:
                    row[_ERRORS] = self._named_errors(row[_ERRORS])
        return values if row is None else tuple(row)

    def _learn(self, text: str) -> None:
        try:
            pairs = named_topic_ids(text)
        except ValueError:  # text a custom pairing decoder wrote otherwise: nothing to learn
            return
        names = self.names
        for topic_id, name in pairs:
            if len(names) < MAX_NAMES or topic_id in names:
                names[topic_id] = name

    def _named_errors(self, errors: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The entries with a ``topic`` beside a ``topic_id`` the map knows (placed first, in the
        order of error_sites.ERROR_KEYS)."""
        if not errors:
            return errors
        out = []
        for entry in errors:
            topic_id = entry.get("topic_id")
            name = self.names.get(topic_id) if isinstance(topic_id, str) else None
            if name is not None and "topic" not in entry:
                entry = {"topic": name, **entry}
            out.append(entry)
        return out
