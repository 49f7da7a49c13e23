"""Produce's hand-written response encoder (kafkapy.protocol.produce_response), a fast path, held
byte-equal to the compiled schema encoder it wraps, over random answers of every version it takes,
including the ones it hands back (record errors, extra fields, values out of range)."""

from __future__ import annotations

import functools
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import EncodeError
from kafkapy.protocol import codec
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter, response_encoder
from kafkapy.protocol.produce_response import FAST_VERSIONS, body_steps, fast_response_encoder
from kafkapy.protocol.steps import all_at_once

INT64 = st.integers(-(2**63), 2**63 - 1)


@functools.cache
def _general(version: int) -> Any:
    """The compiled schema encoder alone: what the codec serves with the fast path taken away."""
    kept = dict(codec._response_encoders)
    try:
        codec._response_encoders.clear()
        with mock.patch.object(codec, "FAST_VERSIONS", range(0)):
            return codec.response_encoder(ApiKey.PRODUCE, version)
    finally:
        codec._response_encoders.clear()
        codec._response_encoders.update(kept)


partition = st.fixed_dictionaries({
    "index": st.integers(-(2**31), 2**31 - 1),
    "error_code": st.integers(-(2**15), 2**15 - 1),
    "base_offset": INT64,
    "log_append_time_ms": INT64,
    "log_start_offset": INT64,
    "record_errors": st.one_of(st.just([]), st.lists(st.fixed_dictionaries({
        "batch_index": st.integers(0, 100),
        "batch_index_error_message": st.one_of(st.none(), st.text(max_size=20))}), max_size=2)),
    "error_message": st.one_of(st.none(), st.text(max_size=200)),
})
answers = st.fixed_dictionaries({
    "responses": st.lists(st.fixed_dictionaries({
        "name": st.text(max_size=140),
        "partition_responses": st.lists(partition, max_size=4)}), max_size=4),
    "throttle_time_ms": st.integers(0, 2**31 - 1),
})


def outcome(encode: Any, correlation_id: int, body: Any) -> object:
    try:
        return encode(correlation_id, body)
    except EncodeError as exc:
        return ("EncodeError", str(exc))


def test_the_codec_serves_the_fast_encoder_for_v3_to_v12() -> None:
    assert list(FAST_VERSIONS) == list(range(3, 13))
    for version in FAST_VERSIONS:
        assert response_encoder(ApiKey.PRODUCE, version).__qualname__.startswith("fast_response_encoder")
    assert not response_encoder(ApiKey.PRODUCE, 13).__qualname__.startswith("fast_response_encoder")


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(FAST_VERSIONS)), body=answers, correlation_id=st.integers(0, 2**31 - 1))
def test_equal_to_the_general_encoder_on_fitted_answers(version: int, body: dict[str, Any],
                                                        correlation_id: int) -> None:
    fitted = body_fitter(ApiKey.PRODUCE, "response", version)(body)
    fast, general = response_encoder(ApiKey.PRODUCE, version), _general(version)
    assert outcome(fast, correlation_id, fitted) == outcome(general, correlation_id, fitted)


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(list(FAST_VERSIONS)), body=answers, extra=st.sampled_from(
    ["node_endpoints", "current_leader", None]), out_of_range=st.booleans())
def test_unusual_answers_go_to_the_general_encoder(version: int, body: dict[str, Any], extra: str | None,
                                                    out_of_range: bool) -> None:
    fitted = body_fitter(ApiKey.PRODUCE, "response", version)(body)
    if extra == "node_endpoints":
        fitted[extra] = []
    elif extra == "current_leader":
        for topic in fitted["responses"]:
            for answer in topic["partition_responses"]:
                answer[extra] = {"leader_id": 1, "leader_epoch": 2}
    if out_of_range:
        fitted["throttle_time_ms"] = 2**31
    fast, general = response_encoder(ApiKey.PRODUCE, version), _general(version)
    assert outcome(fast, 7, fitted) == outcome(general, 7, fitted)


def test_a_one_partition_answer_as_bytes() -> None:
    # Read off Kafka's ProduceResponse v10 layout by hand: header tags, one topic, one partition.
    body = body_fitter(ApiKey.PRODUCE, "response", 10)({"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0})
    assert response_encoder(ApiKey.PRODUCE, 10)(7, body).hex() == (
        "00000007" "00" "02" "0274" "02" "00000000" "0000" "0000000000000005" "ffffffffffffffff"
        "0000000000000000" "01" "00" "00" "00" "00000000" "00")


@pytest.mark.parametrize("version", list(FAST_VERSIONS))
def test_the_wrapper_is_built_over_the_general_encoder(version: int) -> None:
    general = _general(version)
    assert fast_response_encoder(version, general)(3, body_fitter(ApiKey.PRODUCE, "response", version)(
        {"responses": [], "throttle_time_ms": 0})) == general(3, {"responses": [], "throttle_time_ms": 0})
    assert not general.__qualname__.startswith("fast_response_encoder")


@pytest.mark.parametrize("version", list(FAST_VERSIONS))
def test_the_common_answer_is_written_by_hand_and_the_unusual_one_is_not(version: int) -> None:
    calls: list[int] = []

    def general(correlation_id: int, body: Any) -> bytes:
        calls.append(correlation_id)
        return bytes(_general(version)(correlation_id, body))

    fit = body_fitter(ApiKey.PRODUCE, "response", version)
    answer = {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0,
              "record_errors": [], "error_message": None}
    fast = fast_response_encoder(version, general)
    common = fit({"responses": [{"name": "t", "partition_responses": [answer]}], "throttle_time_ms": 0})
    assert fast(1, common) == _general(version)(1, common) and calls == []
    if version >= 8:
        errors = [{"batch_index": 0, "batch_index_error_message": "bad"}]
        with_errors = {**answer, "record_errors": errors}
        unusual = fit({"responses": [{"name": "t", "partition_responses": [with_errors]}],
                       "throttle_time_ms": 0})
        assert fast(2, unusual) == _general(version)(2, unusual) and calls == [2]


def _stepped(version: int, body: Any, every: int) -> tuple[bytes | None, int]:
    """body_steps run to its end: what it wrote and how often it paused."""
    return all_at_once(body_steps(version, body, every))


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(FAST_VERSIONS)), body=answers, every=st.integers(1, 3))
def test_the_body_in_steps_equals_the_general_encoder(version: int, body: dict[str, Any], every: int) -> None:
    """body_steps, which encodes an answer of very many record errors a slice at a time, against the
    general encoder (its header left off): the same bytes, or None where the general encoder refuses
    the body; a pause every ``every`` record errors."""
    fitted = body_fitter(ApiKey.PRODUCE, "response", version)(body)
    written, pauses = _stepped(version, fitted, every)
    expected = outcome(_general(version), 7, fitted)
    if written is None:
        assert isinstance(expected, tuple)  # EncodeError
        return
    assert isinstance(expected, bytes) and written == expected[4 + (version >= 9):]
    answers = [p for topic in fitted["responses"] for p in topic["partition_responses"]]
    assert pauses == sum(len(p.get("record_errors", ())) for p in answers) // every


def test_the_body_in_steps_takes_only_the_hand_encoders_versions() -> None:
    body = {"responses": [], "throttle_time_ms": 0}
    assert _stepped(13, body, 1) == (None, 0)
    assert _stepped(12, body, 1)[0] == _general(12)(7, body)[5:]
