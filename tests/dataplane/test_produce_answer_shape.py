"""Produce answers of v8+ are sent unfitted (kafkapy.dataplane.produce, FIRST_FITTED_ANSWER_VERSION):
hypothesis holds every shape the handler builds (stored, refused, refused with record errors) equal
to its fitted form, and encoded to the same bytes, for every version from v8 up."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.dataplane.produce import FIRST_FITTED_ANSWER_VERSION, _answer, _failed
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import get_api
from kafkapy.protocol.codec import body_fitter, response_encoder

API = get_api(ApiKey.PRODUCE)
assert API is not None
VERSIONS = range(FIRST_FITTED_ANSWER_VERSION, API.versions.high + 1)

offsets = st.integers(-1, 2**40)
partition_answers = st.one_of(
    st.builds(_answer, st.integers(0, 50), offsets, offsets, offsets),
    st.builds(_failed, st.integers(0, 50), st.sampled_from([ErrorCode.CORRUPT_MESSAGE,
                                                            ErrorCode.NOT_LEADER_OR_FOLLOWER])),
)
record_errors = st.lists(st.tuples(st.integers(0, 9), st.text(max_size=20)), max_size=3)


@given(st.sampled_from(VERSIONS), st.lists(st.tuples(st.text(min_size=1, max_size=10),
                                                     st.lists(st.tuples(partition_answers, record_errors),
                                                              min_size=1, max_size=3)), max_size=3))
def test_v8_and_later_answers_are_their_own_fitted_form(version: int, topics: list[Any]) -> None:
    responses = []
    for name, partitions in topics:
        answers = []
        for answer, errors in partitions:
            if errors:  # as ProduceHandler._append words a rejection with record errors
                answer = _failed(answer["index"], ErrorCode.INVALID_RECORD)
                answer["record_errors"] = [{"batch_index": i, "batch_index_error_message": m}
                                           for i, m in errors]
                answer["error_message"] = f"rejected ({name}-{answer['index']})"
            answers.append(answer)
        key, value = ("topic_id", uuid.uuid5(uuid.NAMESPACE_DNS, name)) if version >= 13 else ("name", name)
        responses.append({key: value, "partition_responses": answers})
    body = {"responses": responses, "throttle_time_ms": 0}
    fitted = body_fitter(ApiKey.PRODUCE, "response", version)(body)
    assert fitted == body
    encode = response_encoder(ApiKey.PRODUCE, version)
    assert encode(7, body) == encode(7, fitted)
