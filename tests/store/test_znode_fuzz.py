"""The ZooKeeper store's znode parsers under Hypothesis: whatever a znode holds, a parser returns a
value or raises CorruptMetadata naming the path, never anything else (what lets a list read skip a
bad child); and what the store writes reads back the same."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from kafkapy.store import BrokerRegistration, CorruptMetadata, ProducerIdBlock, RegisteredEndpoint, TopicInfo
from kafkapy.store.znodes import (
    decode_broker,
    decode_producer_id_block,
    decode_topic,
    encode_broker,
    encode_producer_id_block,
    encode_topic,
)

PATH = "/chroot/some/znode"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def _objects(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects with the format's own keys (so parsing goes deep) and random values."""
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=6),
                           json_values | st.integers(min_value=0, max_value=6), max_size=len(keys) + 2)


def _value_or_corrupt(parse: Any, *args: Any) -> None:
    try:
        parse(*args)
    except CorruptMetadata as exc:
        assert exc.path == PATH and str(exc).startswith(f"{PATH}: ")


@given(_objects(["version", "host", "port", "endpoints", "listener_security_protocol_map", "rack",
                 "features", "kafkapy_tags"]))
def test_any_broker_znode_parses_or_is_corrupt(obj: dict[str, Any]) -> None:
    _value_or_corrupt(decode_broker, 9, obj, PATH)


@given(_objects(["version", "partitions", "topic_id"]))
def test_any_topic_znode_parses_or_is_corrupt(obj: dict[str, Any]) -> None:
    _value_or_corrupt(decode_topic, "t", obj, PATH)


@given(st.binary(max_size=64) | _objects(["version", "broker", "block_start", "block_end"]).map(
    lambda obj: json.dumps(obj).encode()))
@example(b"[" * 100_000)  # json.loads raised RecursionError, not CorruptMetadata
def test_any_producer_id_block_znode_parses_or_is_corrupt(data: bytes) -> None:
    _value_or_corrupt(decode_producer_id_block, data, PATH)


@given(st.integers(min_value=0, max_value=2**31 - 1), st.integers(min_value=0, max_value=2**62),
       st.integers(min_value=1, max_value=10**6))
def test_producer_id_blocks_round_trip(broker_id: int, first_id: int, size: int) -> None:
    block = ProducerIdBlock(broker_id, first_id, size)
    assert decode_producer_id_block(json.dumps(encode_producer_id_block(block)).encode(), PATH) == block


hosts = st.sampled_from(["localhost", "broker.example", "10.0.0.1", "::1"])
endpoints = st.builds(RegisteredEndpoint, st.sampled_from(["PLAINTEXT", "SSL", "INTERNAL"]),
                      st.sampled_from(["PLAINTEXT", "SSL"]), hosts, st.integers(0, 65535))


@given(st.builds(BrokerRegistration, st.integers(0, 2**31 - 1),
                 st.lists(endpoints, min_size=1, max_size=3, unique_by=lambda e: e.listener).map(tuple),
                 st.none() | st.text(min_size=1, max_size=5),
                 st.dictionaries(st.text(min_size=1, max_size=5),
                                 st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=2),
                 st.dictionaries(st.text(min_size=1, max_size=5), st.text(max_size=5), max_size=2)))
def test_broker_registrations_round_trip(registration: BrokerRegistration) -> None:
    obj = json.loads(json.dumps(encode_broker(registration)))
    assert decode_broker(registration.broker_id, obj, PATH) == registration


@given(st.dictionaries(st.integers(0, 50), st.lists(st.integers(0, 9), min_size=1, max_size=3).map(tuple),
                       min_size=1, max_size=5), st.uuids())
def test_topics_round_trip(partitions: dict[int, tuple[int, ...]], topic_id: uuid.UUID) -> None:
    info = TopicInfo("t", topic_id, dict(sorted(partitions.items())))
    assert decode_topic("t", json.loads(json.dumps(encode_topic(info))), PATH) == info
