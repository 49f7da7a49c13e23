"""Fault rules seen on the wire, through kafkapy's blocking client: what each action answers,
what each criterion matches, how often a rule fires."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import ClientError, SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.faults import (
    Delay,
    DropConnection,
    ErrorAnswer,
    FaultRule,
    Stall,
    Throttle,
    TruncateResponse,
)
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.testing import wait_until


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"num.partitions": 2}) as running:
        yield running


@pytest.fixture(autouse=True)
def no_rules_left(broker: Broker) -> Iterator[None]:
    yield
    broker.faults.clear()


def produce(client: SimpleClient, topic: str, partition: int = 0, version: int = 9) -> Any:
    batch = build_record_batch([(b"k", b"v")])
    return client.request(ApiKey.PRODUCE, version, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})


def metadata(client: SimpleClient, *topics: str) -> Any:
    return client.request(ApiKey.METADATA, 9, {"topics": [{"name": t} for t in topics],
                                               "allow_auto_topic_creation": True})


def ready(broker: Broker, topic: str) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        wait_until(lambda: metadata(client, topic).topics[0].error_code == ErrorCode.NONE,
                   what=f"{topic} created")


def partition_errors(response: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.index, p.error_code) for t in response.responses for p in t.partition_responses]


def test_error_answer_is_per_partition_and_the_handler_does_not_run(broker: Broker) -> None:
    ready(broker, "errors")
    with SimpleClient(broker.bootstrap_servers) as client:
        with broker.faults.injected(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                              api=ApiKey.PRODUCE)) as handle:
            answer = produce(client, "errors", 1)
        assert partition_errors(answer) == [("errors", 1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
        assert handle.fired == 1
        after = produce(client, "errors", 1)  # removed: served, and the faulted one was not written
        assert partition_errors(after) == [("errors", 1, ErrorCode.NONE)]
        assert after.responses[0].partition_responses[0].base_offset == 0


def test_error_answer_on_a_topic_level_api(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client, \
            broker.faults.injected(FaultRule(ErrorAnswer(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                             api=ApiKey.METADATA, topic="secret")):
        answer = metadata(client, "secret")
        assert [(t.name, t.error_code) for t in answer.topics] == [
            ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
        assert metadata(client, "public").topics[0].error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_times_every_and_the_first_rule_that_fires_decides(broker: Broker) -> None:
    ready(broker, "counted")
    with SimpleClient(broker.bootstrap_servers) as client:
        second = broker.faults.add(FaultRule(ErrorAnswer(ErrorCode.KAFKA_STORAGE_ERROR), api=ApiKey.PRODUCE,
                                             every=2, times=2))
        fallback = broker.faults.add(FaultRule(ErrorAnswer(ErrorCode.REQUEST_TIMED_OUT), api=ApiKey.PRODUCE))
        codes = [partition_errors(produce(client, "counted"))[0][2] for _ in range(6)]
        assert codes == [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR] * 2 + \
            [ErrorCode.REQUEST_TIMED_OUT] * 2
        assert (second.matched, second.fired, fallback.matched, fallback.fired) == (6, 2, 4, 4)


def test_probability_is_replayed_by_its_seed(broker: Broker) -> None:
    ready(broker, "dice")

    def pattern() -> list[int]:
        rule = FaultRule(ErrorAnswer(ErrorCode.NOT_ENOUGH_REPLICAS), api=ApiKey.PRODUCE,
                         probability=0.5, seed=7)
        with SimpleClient(broker.bootstrap_servers) as client, broker.faults.injected(rule):
            return [partition_errors(produce(client, "dice"))[0][2] for _ in range(16)]
    first = pattern()
    assert first == pattern()
    assert ErrorCode.NONE in first and ErrorCode.NOT_ENOUGH_REPLICAS in first


@pytest.mark.parametrize(("criteria", "fires"), [
    ({"versions": (9, 9)}, True), ({"versions": (3, 8)}, False),
    ({"client_id": "me"}, True), ({"client_id": "someone-else"}, False),
    ({"topic": "matched", "partition": 1}, True), ({"topic": "matched", "partition": 0}, False),
    ({"topic": "other"}, False),
    ({"when": lambda body: body["acks"] == -1}, True), ({"when": lambda body: body["acks"] == 1}, False),
])
def test_criteria(broker: Broker, criteria: dict[str, Any], fires: bool) -> None:
    ready(broker, "matched")
    rule = FaultRule(ErrorAnswer(ErrorCode.INVALID_REQUIRED_ACKS), api=ApiKey.PRODUCE, **criteria)
    with SimpleClient(broker.bootstrap_servers, client_id="me") as client, \
            broker.faults.injected(rule) as handle:
        code = partition_errors(produce(client, "matched", 1))[0][2]
    assert (code == ErrorCode.INVALID_REQUIRED_ACKS) is fires
    assert handle.fired == int(fires)


def test_connection_criterion(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as first, SimpleClient(broker.bootstrap_servers) as second:
        metadata(first)
        metadata(second)
        assert broker.runtime is not None
        ids = sorted(c.info.id for c in broker.runtime.connections)
        assert len(ids) == 2
        rule = FaultRule(DropConnection(), api=ApiKey.METADATA, connection=ids[0])
        with broker.faults.injected(rule) as handle:
            outcomes = []
            for client in (first, second):
                try:
                    metadata(client)
                    outcomes.append("answered")
                except ClientError:
                    outcomes.append("dropped")
        assert sorted(outcomes) == ["answered", "dropped"]
        assert handle.fired == 1


def test_drop_after_takes_effect_but_never_answers(broker: Broker) -> None:
    ready(broker, "dropped")
    with SimpleClient(broker.bootstrap_servers) as client:
        with broker.faults.injected(FaultRule(DropConnection("after"), api=ApiKey.PRODUCE, times=1)):
            with pytest.raises(ClientError, match="closed the connection"):
                produce(client, "dropped")
            answer = produce(client, "dropped")  # a new connection: the first record was written
        assert answer.responses[0].partition_responses[0].base_offset == 1


def test_delay_holds_the_answer(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        metadata(client)
        with broker.faults.injected(FaultRule(Delay(0.3), api=ApiKey.METADATA)):
            start = time.monotonic()
            metadata(client)
            delayed = time.monotonic() - start
        start = time.monotonic()
        metadata(client)
        plain = time.monotonic() - start
    assert delayed >= 0.3 > plain


def test_throttle_answers_at_once_then_mutes_the_connection(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        metadata(client)
        with broker.faults.injected(FaultRule(Throttle(400), api=ApiKey.METADATA, times=1)):
            start = time.monotonic()
            answer = metadata(client)
            answered = time.monotonic() - start
            metadata(client)  # muted: waits out the throttle
            muted = time.monotonic() - start
    assert answer.throttle_time_ms == 400
    assert answered < 0.3 and muted >= 0.39


def test_truncated_response_cannot_be_decoded(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client, \
            broker.faults.injected(FaultRule(TruncateResponse(0.5), api=ApiKey.METADATA, times=1)):
        with pytest.raises(ClientError, match="cannot decode"):
            metadata(client)
        assert metadata(client).brokers  # the connection is still served


def test_stall_answers_once_removed(broker: Broker) -> None:
    handle = broker.faults.add(FaultRule(Stall(), api=ApiKey.METADATA))
    result: list[Any] = []
    with SimpleClient(broker.bootstrap_servers) as client:
        thread = threading.Thread(target=lambda: result.append(metadata(client)))
        thread.start()
        wait_until(lambda: handle.fired == 1, what="the request to stall")
        time.sleep(0.2)
        assert not result
        handle.remove()
        thread.join(5)
    assert result and result[0].brokers


def test_no_interceptor_without_rules(broker: Broker) -> None:
    assert broker.runtime is not None
    dispatcher = broker.runtime.dispatcher
    before = list(dispatcher.interceptors)
    handle = broker.faults.add(FaultRule(Delay(0), api=ApiKey.METADATA))
    assert len(dispatcher.interceptors) == len(before) + 1
    broker.faults.add(FaultRule(Delay(0), api=ApiKey.PRODUCE))
    assert len(dispatcher.interceptors) == len(before) + 1  # one injector for every rule
    broker.faults.clear()
    assert dispatcher.interceptors == before
    handle.remove()  # again: nothing


def test_rules_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="times"):
        FaultRule(Delay(1), times=0)
    with pytest.raises(ValueError, match="probability"):
        FaultRule(Delay(1), probability=2)
    with pytest.raises(ValueError, match="topic"):
        FaultRule(Delay(1), partition=3)
    with pytest.raises(ValueError, match="keep"):
        TruncateResponse(1.5)


@pytest.mark.parametrize(("build", "error", "message"), [
    # each of these was accepted, then failed on the broker's loop when the rule fired: the
    # request's connection closed (a Delay's after the write, so the client's retry wrote twice)
    (lambda: ErrorAnswer("NOT_LEADER_OR_FOLLOWER"), TypeError, r"ErrorCode.NOT_LEADER_OR_FOLLOWER"),
    (lambda: ErrorAnswer(6), TypeError, r"takes an ErrorCode"),
    (lambda: Delay("0.5"), ValueError, r"Delay takes seconds"),
    (lambda: Delay(-1), ValueError, r"Delay takes seconds"),
    (lambda: Throttle(2.5), ValueError, r"Throttle takes milliseconds"),
    (lambda: Throttle(-1), ValueError, r"Throttle takes milliseconds"),
    (lambda: DropConnection("later"), ValueError, r"\"before\" or \"after\""),  # type: ignore[arg-type]
    (lambda: TruncateResponse("half"), ValueError, r"keep"),
    # a string is a collection of letters: this said "'P' is not a valid ApiKey"
    (lambda: FaultRule(Stall(), api="Produce"), TypeError, r"api takes an ApiKey"),
    (lambda: FaultRule(Stall(), api=[]), ValueError, r"empty collection"),
    (lambda: FaultRule(ErrorCode.NOT_LEADER_OR_FOLLOWER), TypeError, r"action is one of"),
], ids=["code-as-name", "code-as-number", "delay-as-text", "negative-delay", "fractional-throttle",
        "negative-throttle", "drop-later", "keep-as-text", "api-as-name", "no-api", "code-as-action"])
def test_actions_are_checked_where_the_rule_is_built(build: Any, error: type[Exception],
                                                     message: str) -> None:
    with pytest.raises(error, match=message):
        build()


def test_add_takes_a_rule(broker: Broker) -> None:
    with pytest.raises(TypeError, match=r"faults\.add takes a FaultRule"):
        broker.faults.add(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER))  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [0, 9])
def test_throttle_says_so_where_the_version_can(broker: Broker, version: int) -> None:
    """Metadata v0 has no throttle_time_ms: the mute alone is the throttle, as for Kafka's quotas."""
    with SimpleClient(broker.bootstrap_servers) as client, \
            broker.faults.injected(FaultRule(Throttle(100), api=ApiKey.METADATA, times=1)):
        answer = client.request(ApiKey.METADATA, version, {"topics": []})
        start = time.monotonic()
        client.request(ApiKey.METADATA, version, {"topics": []})
        muted = time.monotonic() - start
    assert answer.get("throttle_time_ms") == (100 if version else None)
    assert muted >= 0.08  # the mute began as the first answer left: less its way back
