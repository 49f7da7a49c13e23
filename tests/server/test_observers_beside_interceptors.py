"""What observers see that the interceptor chain does not: the contract any merge of the two must keep.

Observers (KIP-388) sit outside the chain: they see the raw request frame before it is decoded,
the decoded request before module hooks and interceptors, and the response after the outermost
interceptor, after a KafkaApiError became a body, and after encoding (the frame's bytes). They
also see the dispatcher's own answers (unknown keys, unsupported versions) and frames that fail
to decode, none of which reach an interceptor. These tests pin that order and coverage.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the broker imports observer_fixtures by name

from observer_fixtures import TIMELINE
from server_wire import Closed, KafkaSocket, raw_header

from kafkapy import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol import Request, decode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.interceptors import PASS, Interceptor, Pass
from kafkapy.server.modules import Answer, Module, RequestContext

TIMELINE_OBSERVER = "observer_fixtures.TimelineObserver"
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
DESCRIBE_CLUSTER = {"include_cluster_authorized_operations": False}


class Outermost(Interceptor):
    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        TIMELINE.append(("interceptor.before", context.correlation_id))
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        TIMELINE.append(("interceptor.after", context.correlation_id))
        if context.api_key == ApiKey.METADATA and isinstance(answer, dict):
            return {**answer, "cluster_id": "rewritten"}
        return answer


class RefusesDescribeCluster(Interceptor):
    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        if context.api_key == ApiKey.DESCRIBE_CLUSTER:
            raise KafkaApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "refused in the chain")
        return PASS


class HookAndChain(Module):
    name = "hook-and-chain"

    async def start(self) -> None:
        self.services.install_interceptor(Outermost())
        self.services.install_interceptor(RefusesDescribeCluster())

    async def on_request(self, context: RequestContext, request: Request) -> None:
        TIMELINE.append(("hook", context.correlation_id))


@pytest.fixture
def broker() -> Iterator[Broker]:
    TIMELINE.clear()
    with Broker({"observer.class.names": TIMELINE_OBSERVER}, modules=[HookAndChain]) as b:
        yield b
    TIMELINE.clear()


def _kinds() -> list[tuple[object, ...]]:
    """TIMELINE without the payloads: (event, direction or correlation id)."""
    return [event[:2] if event[0] != "observer.request" else (event[0], event[2]) for event in TIMELINE]


def test_observers_see_the_request_before_hooks_and_the_rewritten_encoded_answer_last(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as s:
        s.send(ApiKey.METADATA, 12, METADATA, correlation_id=7)
        wire = s.read_frame()
    assert _kinds() == [("observer.frame", "in"), ("observer.request", 7), ("hook", 7),
                        ("interceptor.before", 7), ("interceptor.after", 7),
                        ("observer.response", 7), ("observer.frame", "out")]
    response = TIMELINE[-2][2]
    assert response["cluster_id"] == "rewritten"  # what the outermost interceptor made of it
    assert TIMELINE[-1][2] == wire  # the bytes the client got
    assert decode_response(wire, ApiKey.METADATA, 12).body["cluster_id"] == "rewritten"


def test_observers_see_a_refusal_raised_in_the_chain_as_the_body_sent(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as s:
        s.send(ApiKey.DESCRIBE_CLUSTER, 0, DESCRIBE_CLUSTER, correlation_id=8)
        wire = s.read_frame()
    # The outermost interceptor's after never runs for a raised refusal; observers see its body.
    assert _kinds() == [("observer.frame", "in"), ("observer.request", 8), ("hook", 8),
                        ("interceptor.before", 8), ("observer.response", 8), ("observer.frame", "out")]
    response = TIMELINE[-2][2]
    assert response["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert response["error_message"] == "refused in the chain"
    assert TIMELINE[-1][2] == wire


def test_observers_see_the_dispatchers_own_answers_which_no_interceptor_sees(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as s:
        s.send_body(raw_header(4242, 2, 13))  # unknown key: the KIP-35 empty response
        assert s.read_frame() == (13).to_bytes(4, "big")
        s.send_body(raw_header(ApiKey.METADATA, 99, 14))  # unsupported version: the same
        assert s.read_frame() == (14).to_bytes(4, "big")
    requests = [(event[1], event[2], event[3]) for event in TIMELINE if event[0] == "observer.request"]
    responses = [(event[1], event[2]) for event in TIMELINE if event[0] == "observer.response"]
    assert requests == [(4242, 13, None), (ApiKey.METADATA, 14, None)]
    assert responses == [(13, None), (14, None)]
    chain_events = ("hook", "interceptor.before", "interceptor.after")
    assert not [event for event in TIMELINE if event[0] in chain_events]


def test_observers_see_the_frame_of_a_request_that_fails_to_decode(broker: Broker) -> None:
    frame = raw_header(ApiKey.METADATA, 12, 15) + b"\xff\xff\xff"  # header v2 expects tagged fields
    with KafkaSocket(broker.bootstrap_servers) as s:
        s.send_body(frame)
        with pytest.raises(Closed):
            s.read_frame()
    assert TIMELINE == [("observer.frame", "in", frame)]  # no request, no hook, no interceptor
