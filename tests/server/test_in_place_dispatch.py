"""Requests answered in place: what the fast path must keep.

Most requests are answered inside the read that brought them (the handler's coroutine is
stepped once and finishes); a request whose hooks or handler really wait goes to the
connection's worker, with everything behind it. ApiVersions answers are memoized by request
bytes. These tests pin the edges of that: order, what waits behind what, what happens when a
waiting request fails, and that a memoized answer is the handler's answer, byte for byte.
"""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest
from held_request import HeldDescribeCluster, held, nothing_to_read, the_connection
from observer_fixtures import RecordingObserver
from server_wire import KafkaSocket, frame, request_frame

from kafkapy import Broker
from kafkapy.protocol import Request, decode_response, encode_request
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.testing import wait_until

API_VERSIONS, METADATA, DESCRIBE_CLUSTER = 18, 3, 60
SOFTWARE = {"client_software_name": "kafkapy-tests", "client_software_version": "1.0"}


class FailingAfterAWait(Module):
    """DescribeCluster waits, then fails: the connection closes after the answers before it."""

    name = "failing-after-a-wait"

    async def on_request(self, context: RequestContext, request: Request) -> None:
        if context.api_key == DESCRIBE_CLUSTER:
            await asyncio.sleep(0.05)
            raise RuntimeError("the hook failed after waiting")


def _read(s: KafkaSocket) -> tuple[int, bytes]:
    raw = s.read_frame()
    return struct.unpack_from(">i", raw)[0], raw


def test_requests_behind_a_waiting_one_keep_their_order_and_the_connection_recovers() -> None:
    """In one write: a fast request, a held one, two fast ones. The first answer leaves while the
    held one waits; the two behind it wait for it and come after it, in order; then the connection
    serves requests again."""
    with Broker(modules=[HeldDescribeCluster]) as b, KafkaSocket(b.bootstrap_servers) as s:
        data = (request_frame(API_VERSIONS, 3, 1, SOFTWARE)
                + request_frame(DESCRIBE_CLUSTER, 0, 2, {"include_cluster_authorized_operations": False})
                + request_frame(API_VERSIONS, 3, 3, SOFTWARE)
                + request_frame(METADATA, 12, 4, {"topics": None}))
        release = held(b).release
        try:
            s.send_raw(data)
            assert _read(s)[0] == 1, "the first answer waited for the held request"
            assert nothing_to_read(s.sock), "an answer behind the held request came before it"
            release.set()
            assert [_read(s)[0] for _ in range(3)] == [2, 3, 4]
        finally:
            release.set()
        # The worker is done and nothing is queued: the connection serves requests again. (Each
        # still goes through a worker task of its own here: the module's hook is a coroutine.)
        connection = the_connection(b)
        wait_until(lambda: not connection.busy, what="the worker to finish the queue")
        for _ in range(5):
            assert s.call(API_VERSIONS, 3, SOFTWARE).body["error_code"] == 0
        assert not connection.busy and not connection.queue


def test_frames_arriving_while_a_request_waits_are_answered_after_it() -> None:
    with Broker(modules=[HeldDescribeCluster]) as b, KafkaSocket(b.bootstrap_servers) as s:
        release = held(b).release
        try:
            describe = {"include_cluster_authorized_operations": False}
            s.send_raw(request_frame(DESCRIBE_CLUSTER, 0, 1, describe))
            connection = the_connection(b)
            wait_until(lambda: connection.busy and connection.handed is None,
                       what="the worker to be waiting on the held request")
            s.send_raw(request_frame(API_VERSIONS, 3, 2, SOFTWARE))  # these come in later reads
            s.send_raw(request_frame(METADATA, 12, 3, {"topics": None}))
            assert nothing_to_read(s.sock), "an answer behind the held request came before it"
            release.set()
            assert [_read(s)[0] for _ in range(3)] == [1, 2, 3]
        finally:
            release.set()


def test_a_request_failing_after_it_waited_closes_after_the_answers_before_it(
        caplog: pytest.LogCaptureFixture) -> None:
    with Broker(modules=[FailingAfterAWait]) as b, KafkaSocket(b.bootstrap_servers) as s:
        with caplog.at_level(logging.ERROR, logger="kafkapy"):
            describe = {"include_cluster_authorized_operations": False}
            s.send_raw(request_frame(API_VERSIONS, 3, 1, SOFTWARE)
                       + request_frame(DESCRIBE_CLUSTER, 0, 2, describe)
                       + request_frame(API_VERSIONS, 3, 3, SOFTWARE))
            assert _read(s)[0] == 1
            assert s.wait_closed() == b""
        assert any("api key 60 v0 failed" in r.getMessage() for r in caplog.records)


def test_memoized_api_versions_answers_are_the_handlers_byte_for_byte() -> None:
    """Every ApiVersions version, asked twice on two connections with other correlation ids: the
    answers differ in the correlation id only, and equal those of a broker that memoizes
    nothing (an observer is configured: it must see every request)."""
    requests = [(version, encode_request(API_VERSIONS, version, 0, "memo-tests",
                                         SOFTWARE if version >= 3 else {})) for version in range(5)]

    def exchange(b: Broker) -> list[bytes]:
        answers = []
        for _ in range(2):
            with KafkaSocket(b.bootstrap_servers) as s:
                for correlation_id, (version, body) in enumerate(requests, start=100):
                    s.send_raw(frame(body[:4] + struct.pack(">i", correlation_id) + body[8:]))
                    correlation, raw = _read(s)
                    assert correlation == correlation_id
                    decode_response(raw, API_VERSIONS, version)  # a well-formed answer
                    answers.append(raw[4:])
        return answers

    with Broker({"broker.id": "7", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"}) as b:
        memoized = exchange(b)
        routes = b.runtime.dispatcher.routes
        assert routes[API_VERSIONS].memoize
        assert all(routes[API_VERSIONS].versions[v].memo for v in range(5)), "the memo was not used"
        assert not routes[METADATA].memoize
    assert memoized[:5] == memoized[5:]
    with Broker({"broker.id": "7", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA",
                 "observer.class.names": "observer_fixtures.RecordingObserver"}) as b:
        assert not b.runtime.dispatcher.routes[API_VERSIONS].memoize
        assert exchange(b) == memoized
        (observer,) = RecordingObserver.instances[-1:]
        assert len(observer.requests) == len(observer.responses) == 10


def test_a_refused_software_name_is_answered_the_same_every_time() -> None:
    bad = {"client_software_name": "-bad-", "client_software_version": "1.0"}
    with Broker() as b, KafkaSocket(b.bootstrap_servers) as s:
        for _ in range(3):
            assert s.call(API_VERSIONS, 3, bad).body["error_code"] == 42  # INVALID_REQUEST
        assert s.call(API_VERSIONS, 3, SOFTWARE).body["error_code"] == 0


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkapy.server import memo

    monkeypatch.setattr(memo, "MEMO_SIZE", 4)
    with Broker() as b, KafkaSocket(b.bootstrap_servers) as s:
        for i in range(10):
            body = {"client_software_name": f"client{i}", "client_software_version": "1.0"}
            assert s.call(API_VERSIONS, 3, body).body["error_code"] == 0
        assert 0 < len(b.runtime.dispatcher.routes[API_VERSIONS].versions[3].memo or {}) <= 4


UNSERVED_DESCRIBE = 89  # StreamsGroupDescribe (KIP-1071): served by no built-in module


class UnencodableAnswer(Module):
    """A buggy module: its StreamsGroupDescribe answer cannot be encoded (a string where an int goes).
    Without a wait when the group is "now", after one when it is "later"."""

    name = "unencodable-answer"

    def apis(self) -> dict[int, ApiHandler]:
        return {UNSERVED_DESCRIBE: ApiHandler(VersionRange(0, 0), self._describe)}

    async def _describe(self, context: RequestContext, request: Request) -> dict[str, object]:
        if request.body["group_ids"] == ["later"]:
            await asyncio.sleep(0.05)
        return {"throttle_time_ms": "not a number", "groups": []}


@pytest.mark.parametrize("group", ["now", "later"])
def test_an_answer_that_cannot_be_encoded_closes_only_that_connection(
        group: str, caplog: pytest.LogCaptureFixture) -> None:
    """The client is never left waiting for an answer that will not come: the answers before the
    bad one go out, then the connection closes, the error is logged, and others keep being served."""
    with Broker(modules=[UnencodableAnswer]) as b, KafkaSocket(b.bootstrap_servers) as s, \
            KafkaSocket(b.bootstrap_servers) as other:
        with caplog.at_level(logging.ERROR, logger="kafkapy"):
            s.send_raw(request_frame(API_VERSIONS, 3, 1, SOFTWARE)
                       + request_frame(UNSERVED_DESCRIBE, 0, 2, {"group_ids": [group]})
                       + request_frame(API_VERSIONS, 3, 3, SOFTWARE))
            assert _read(s)[0] == 1
            assert s.wait_closed() == b""
        assert any("cannot encode the response to api key 89 v0" in r.getMessage() for r in caplog.records)
        assert other.call(API_VERSIONS, 3, SOFTWARE).body["error_code"] == 0


class PlainFunctionHandler(Module):
    """StreamsGroupDescribe served by a plain function (no coroutine): it answers, raises, or returns an
    awaitable that is not a coroutine (a future resolved a little later), by the group asked for."""

    name = "plain-function-handler"

    def apis(self) -> dict[int, ApiHandler]:
        return {UNSERVED_DESCRIBE: ApiHandler(VersionRange(0, 0), self._describe)}

    def _describe(self, context: RequestContext, request: Request) -> object:
        group = request.body["group_ids"][0]
        described = {"error_code": 0, "group_id": group, "group_state": "Empty", "members": []}
        answer = {"throttle_time_ms": 0, "groups": [described]}
        if group == "raises":
            raise RuntimeError("the plain handler failed")
        if group == "future":
            future = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.05, future.set_result, answer)
            return future
        return answer


class CountingHook(Module):
    """A request hook, so handlers run behind the hooks' coroutine."""

    name = "counting-hook"
    seen = 0

    async def on_request(self, context: RequestContext, request: Request) -> None:
        CountingHook.seen += 1


def _group(s: KafkaSocket, correlation_id: int) -> str:
    correlation, raw = _read(s)
    assert correlation == correlation_id
    return str(decode_response(raw, UNSERVED_DESCRIBE, 0).body["groups"][0]["group_id"])


@pytest.mark.parametrize("hooked", [False, True], ids=["no hooks", "behind a hook"])
def test_plain_function_handlers_answer_in_order_and_may_return_an_awaitable(hooked: bool) -> None:
    modules: list[type[Module]] = [PlainFunctionHandler, CountingHook] if hooked else [PlainFunctionHandler]
    before = CountingHook.seen
    with Broker(modules=modules) as b, KafkaSocket(b.bootstrap_servers) as s:
        s.send_raw(request_frame(UNSERVED_DESCRIBE, 0, 1, {"group_ids": ["plain"]})
                   + request_frame(UNSERVED_DESCRIBE, 0, 2, {"group_ids": ["future"]})
                   + request_frame(UNSERVED_DESCRIBE, 0, 3, {"group_ids": ["plain-again"]}))
        assert [_group(s, 1), _group(s, 2), _group(s, 3)] == ["plain", "future", "plain-again"]
    assert CountingHook.seen - before == (3 if hooked else 0)


def test_a_plain_function_handler_that_raises_closes_only_that_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    with Broker(modules=[PlainFunctionHandler]) as b, KafkaSocket(b.bootstrap_servers) as s, \
            KafkaSocket(b.bootstrap_servers) as other:
        with caplog.at_level(logging.ERROR, logger="kafkapy"):
            s.send_raw(request_frame(UNSERVED_DESCRIBE, 0, 1, {"group_ids": ["plain"]})
                       + request_frame(UNSERVED_DESCRIBE, 0, 2, {"group_ids": ["raises"]})
                       + request_frame(API_VERSIONS, 3, 3, SOFTWARE))
            assert _group(s, 1) == "plain"
            assert s.wait_closed() == b""
        assert any("handler for api key 89 v0 failed" in r.getMessage() for r in caplog.records)
        assert other.call(API_VERSIONS, 3, SOFTWARE).body["error_code"] == 0
