"""Fuzzing the consumer protocol's reader (a classic member's JoinGroup metadata and SyncGroup
assignment, which the broker and the capture rows decode): any bytes, and valid encodings cut or
with a byte changed, are a value or ConsumerProtocolError in one line; what is encoded reads back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.protocol.consumer_protocol import (
    ASSIGNMENT,
    SUBSCRIPTION,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_json,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

_TOPICS = st.text(max_size=6)
_PARTITIONS = st.dictionaries(_TOPICS, st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=3),
                              max_size=3)
_SUBSCRIPTIONS = st.builds(Subscription, st.lists(_TOPICS, max_size=3).map(tuple), _PARTITIONS,
                           st.none() | _TOPICS, st.integers(0, 3))
_VALID = _SUBSCRIPTIONS.map(encode_subscription) | \
    st.builds(encode_assignment, _PARTITIONS, st.integers(0, 3))


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    """A valid encoding cut short, grown, or with one byte changed (a later version's too)."""
    data = bytearray(draw(_VALID))
    how = draw(st.sampled_from(["cut", "grow", "flip", "version"]))
    if how == "cut":
        return bytes(data[:draw(st.integers(0, len(data)))])
    if how == "grow":
        return bytes(data) + draw(st.binary(min_size=1, max_size=8))
    if how == "version":
        return draw(st.sampled_from([b"\x00\x04", b"\x7f\xff", b"\xff\xff"])) + bytes(data[2:])
    at = draw(st.integers(0, len(data) - 1))
    data[at] = draw(st.integers(0, 255))
    return bytes(data)


@given(st.binary(max_size=64) | _mutated())
def test_any_bytes_are_a_subscription_an_assignment_or_one_line(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment, lambda d: decode_json(SUBSCRIPTION, d),
                   lambda d: decode_json(ASSIGNMENT, d)):
        try:
            decode(data)
        except ConsumerProtocolError as refused:
            assert str(refused) and "\n" not in str(refused)


@given(_SUBSCRIPTIONS)
def test_a_subscription_reads_back(subscription: Subscription) -> None:
    found = decode_subscription(encode_subscription(subscription))
    assert found.topics == subscription.topics and found.version == subscription.version
    assert found.owned == (subscription.owned if subscription.version >= 1 else {})
    assert found.rack_id == (subscription.rack_id if subscription.version >= 3 else None)


@given(_PARTITIONS, st.integers(0, 3))
def test_an_assignment_reads_back(partitions: dict[str, frozenset[int]], version: int) -> None:
    assert decode_assignment(encode_assignment(partitions, version)) == partitions
