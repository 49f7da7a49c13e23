"""error_answer: a failing answer to any request, derived from the response schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode
from kafkapy.protocol import catalogue, decode_request, decode_response, encode_request, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.error_answers import error_answer, has_error_code

CODE = ErrorCode.NOT_LEADER_OR_FOLLOWER


def codes(value: Any) -> Iterator[int]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "error_code":
                yield item
            else:
                yield from codes(item)
    elif isinstance(value, list):
        for item in value:
            yield from codes(item)


def answered(api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    """``body`` as a client would read it: encoded, then decoded."""
    return decode_response(encode_response(api_key, version, 1, body), api_key, version).body


def every_api_version() -> Iterator[tuple[int, int]]:
    for key, api in sorted(catalogue().items()):
        if 0 <= key < 1000:
            for version in range(api.versions.low, api.versions.high + 1):
                yield key, version


@pytest.mark.parametrize(("api_key", "version"), list(every_api_version()))
def test_every_api_version_answers_with_the_code_or_says_it_cannot(api_key: int, version: int) -> None:
    """A default request (empty arrays) of every version of every API: the code at the top, where
    the response has one."""
    request = decode_request(encode_request(api_key, version, 1, "c", {})).body
    top_level = "error_code" in answered(api_key, version, {})
    if not top_level:  # an empty request leaves no partition (or topic) to carry it: said, not guessed
        with pytest.raises(ValueError, match="no error_code"):
            error_answer(api_key, version, request, CODE)
        return
    assert has_error_code(api_key, version)
    answer = error_answer(api_key, version, request, CODE)
    assert answered(api_key, version, answer)["error_code"] == CODE

topics = st.dictionaries(st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8),
                         st.lists(st.integers(0, 50), min_size=1, max_size=4, unique=True),
                         min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(topics, st.integers(3, 12))  # v13 names topics by id, as Fetch v13+ does (below)
def test_produce_answers_each_partition_it_was_sent(named: dict[str, list[int]], version: int) -> None:
    request = {"acks": -1, "timeout_ms": 1, "topic_data": [
        {"name": t, "partition_data": [{"index": p, "records": None} for p in ps]}
        for t, ps in named.items()]}
    request = decode_request(encode_request(ApiKey.PRODUCE, version, 1, "c", request)).body
    answer = error_answer(ApiKey.PRODUCE, version, request, CODE)
    decoded = answered(ApiKey.PRODUCE, version, answer)
    got = {(t.name, p.index, p.error_code) for t in decoded.responses for p in t.partition_responses}
    assert got == {(t, p, CODE) for t, ps in named.items() for p in ps}
    assert "error_code" not in decoded  # Produce has none at the top
    assert {p.base_offset for t in decoded.responses for p in t.partition_responses} == {-1}  # INVALID_OFFSET


@settings(max_examples=40, deadline=None)
@given(topics, st.integers(4, 17))
def test_fetch_answers_by_name_or_id_and_leaves_the_top_alone(named: dict[str, list[int]],
                                                               version: int) -> None:
    ids = {t: uuid.uuid4() for t in named}
    by = "topic_id" if version >= 13 else "topic"
    request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {by: ids[t] if by == "topic_id" else t,
         "partitions": [{"partition": p, "fetch_offset": 0} for p in ps]} for t, ps in named.items()]}
    request = decode_request(encode_request(ApiKey.FETCH, version, 1, "c", request)).body
    answer = error_answer(ApiKey.FETCH, version, request, CODE)
    decoded = answered(ApiKey.FETCH, version, answer)
    got = {(t[by], p.partition_index, p.error_code) for t in decoded.responses for p in t.partitions}
    assert got == {(ids[t] if by == "topic_id" else t, p, CODE) for t, ps in named.items() for p in ps}
    if version >= 7:
        assert decoded.error_code == ErrorCode.NONE  # the session is fine; its partitions are not


def test_topic_level_and_top_level_answers() -> None:
    metadata = error_answer(ApiKey.METADATA, 12, {"topics": [{"name": "a", "topic_id": uuid.UUID(int=0)}]},
                            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert [(t["name"], t["error_code"], t["partitions"]) for t in metadata["topics"]] == [
        ("a", ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])]
    join = error_answer(ApiKey.JOIN_GROUP, 7, {"group_id": "g", "protocols": [{"name": "range"}]},
                        ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert join["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE and join["members"] == []
