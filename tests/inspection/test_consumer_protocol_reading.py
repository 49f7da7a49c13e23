"""The views' reading of classic consumers' metadata and assignments: what clients encode (every
version starts with the v0 layout) reads back as topics and partitions, and bytes that are not
a consumer protocol message read as nothing, never as an exception."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.inspection.groups import assignment_partitions, subscription_topics

topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=20)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def encode_assignment(version: int, assigned: dict[str, list[int]], tail: bytes) -> bytes:
    """ConsumerProtocolAssignment as a Java client writes it: version, [topic, [partition]],
    user_data (null here), then whatever later versions add (``tail``)."""
    body = struct.pack(">hi", version, len(assigned))
    for topic, partitions in assigned.items():
        body += _string(topic) + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return body + struct.pack(">i", -1) + tail


def encode_subscription(version: int, topics: list[str], tail: bytes) -> bytes:
    body = struct.pack(">hi", version, len(topics)) + b"".join(_string(t) for t in topics)
    return body + struct.pack(">i", -1) + tail


@given(st.integers(0, 3),
       st.dictionaries(topic_names, st.lists(st.integers(0, 1000), max_size=8), max_size=5),
       st.binary(max_size=16))
def test_an_assignment_reads_back_by_topic(version: int, assigned: dict[str, list[int]], tail: bytes) -> None:
    read = assignment_partitions(encode_assignment(version, assigned, tail))
    assert dict(read) == {topic: tuple(sorted(set(parts))) for topic, parts in sorted(assigned.items())}


@given(st.integers(0, 3), st.lists(topic_names, max_size=6, unique=True), st.binary(max_size=16))
def test_a_subscription_reads_back_sorted(version: int, topics: list[str], tail: bytes) -> None:
    assert subscription_topics(encode_subscription(version, topics, tail)) == tuple(sorted(topics))


@given(st.binary(max_size=64))
def test_garbage_reads_as_nothing_never_an_exception(data: bytes) -> None:
    assert isinstance(subscription_topics(data), tuple)
    assert isinstance(dict(assignment_partitions(data)), dict)
