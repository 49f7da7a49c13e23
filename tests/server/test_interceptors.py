"""The interceptor chain, over real sockets and a real client: answer, rewrite, delay, drop.

Each test installs its interceptors the way a module would (``services.install_interceptor`` in
``start``), then talks to the broker over TCP.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest
from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.interceptors import PASS, CloseConnection, Interceptor, Pass
from kafkapy.server.modules import Answer, Module, RequestContext

SOFTWARE = {"client_software_name": "kafkapy-tests", "client_software_version": "1.0"}
DESCRIBE_CLUSTER = {"include_cluster_authorized_operations": False}
DELAY = 0.4  # seconds an interceptor holds a request


def broker_with(*chain: Interceptor) -> Broker:
    """A broker whose one extra module installs ``chain`` (outermost first) when it starts."""

    class Installs(Module):
        name = "installs-interceptors"
        interceptors: ClassVar[Sequence[Interceptor]] = chain

        async def start(self) -> None:
            for interceptor in self.interceptors:
                self.services.install_interceptor(interceptor)

    return Broker(modules=[Installs])


class Recording(Interceptor):
    """Notes what it sees; does nothing else."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        self.log.append(f"{self.name}.before")
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        self.log.append(f"{self.name}.after")
        return answer


class RefusesDescribeCluster(Interceptor):
    """Answers DescribeCluster itself (the handler never runs)."""

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        if context.api_key != ApiKey.DESCRIBE_CLUSTER:
            return PASS
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "refused by an interceptor", "cluster_id": "", "controller_id": -1,
                "brokers": [], "cluster_authorized_operations": 0}


def test_an_interceptor_answers_before_the_handler_and_only_the_outer_ones_see_it() -> None:
    log: list[str] = []
    with broker_with(Recording("outer", log), RefusesDescribeCluster(), Recording("inner", log)) as b, \
            KafkaSocket(b.bootstrap_servers) as s:
        body = s.call(ApiKey.DESCRIBE_CLUSTER, 0, DESCRIBE_CLUSTER).body
        assert body["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert body["error_message"] == "refused by an interceptor"
        assert log == ["outer.before", "outer.after"]
        log.clear()
        metadata = s.call(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False}).body
        assert [broker["node_id"] for broker in metadata["brokers"]] == [b.broker_id]  # the handler's
        assert log == ["outer.before", "inner.before", "inner.after", "outer.after"]


class RenamesTheCluster(Interceptor):
    """Rewrites every Metadata answer's cluster id."""

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        if context.api_key == ApiKey.METADATA and isinstance(answer, Mapping):
            return {**answer, "cluster_id": "rewritten-by-interceptor"}
        return answer


def test_an_interceptor_rewrites_the_answer_a_real_client_sees() -> None:
    from confluent_kafka.admin import AdminClient

    with broker_with(RenamesTheCluster()) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        assert admin.list_topics(timeout=10).cluster_id == "rewritten-by-interceptor"


class Throttles(Interceptor):
    """Kafka's byte-rate quota in miniature: the answer says throttle_time_ms and leaves that late;
    with ``also_before``, the request is held before the handler too."""

    def __init__(self, also_before: bool = False) -> None:
        self.also_before = also_before
        self.handled_at: list[float] = []

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        if self.also_before and context.api_key == ApiKey.DESCRIBE_CLUSTER:
            await asyncio.sleep(DELAY)
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        if context.api_key != ApiKey.DESCRIBE_CLUSTER or not isinstance(answer, Mapping):
            return answer
        self.handled_at.append(time.monotonic())
        await asyncio.sleep(DELAY)  # after the handler, as Kafka mutes the channel after answering
        return {**answer, "throttle_time_ms": int(DELAY * 1000)}


@pytest.mark.parametrize("also_before", [False, True], ids=["delay-after", "delay-before-and-after"])
def test_an_interceptor_delays_the_answer_and_the_requests_behind_it(also_before: bool) -> None:
    throttles = Throttles(also_before)
    with broker_with(throttles) as b, KafkaSocket(b.bootstrap_servers) as s:
        sent = time.monotonic()
        slow = s.send(ApiKey.DESCRIBE_CLUSTER, 0, DESCRIBE_CLUSTER)
        behind = s.send(ApiKey.API_VERSIONS, 3, SOFTWARE)
        answer = s.read_response(ApiKey.DESCRIBE_CLUSTER, 0)
        waited = time.monotonic() - sent
        assert answer.correlation_id == slow and answer.body["throttle_time_ms"] == int(DELAY * 1000)
        expected = DELAY * (2 if also_before else 1)
        assert expected * 0.9 <= waited < expected + 1.0
        # the handler ran only after the delay before it
        assert throttles.handled_at[0] - sent >= (DELAY * 0.9 if also_before else 0)
        assert s.read_response(ApiKey.API_VERSIONS, 3).correlation_id == behind  # in order, after it


class Drops(Interceptor):
    def __init__(self, when: str) -> None:
        self.when = when
        self.handler_answers: list[Answer] = []

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        if self.when == "before" and context.api_key == ApiKey.DESCRIBE_CLUSTER:
            raise CloseConnection
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        if context.api_key == ApiKey.DESCRIBE_CLUSTER:
            self.handler_answers.append(answer)
            if self.when == "after":
                await asyncio.sleep(0.05)  # dropping after a wait works too
                raise CloseConnection
        return answer


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_interceptor_drops_the_connection(when: str) -> None:
    drops = Drops(when)
    with broker_with(drops) as b, KafkaSocket(b.bootstrap_servers) as s:
        assert s.call(ApiKey.API_VERSIONS, 3, SOFTWARE).body["error_code"] == ErrorCode.NONE
        s.send(ApiKey.DESCRIBE_CLUSTER, 0, DESCRIBE_CLUSTER)
        assert s.wait_closed() == b""  # no answer, then the close
        # before: the handler never ran; after: it did, and its answer was dropped
        assert len(drops.handler_answers) == (1 if when == "after" else 0)
        with KafkaSocket(b.bootstrap_servers) as other:  # only that connection went
            assert other.call(ApiKey.API_VERSIONS, 3, SOFTWARE).body["error_code"] == ErrorCode.NONE


def test_memoized_answers_stop_while_an_interceptor_is_installed_and_come_back_after() -> None:
    """With no interceptor the fast path is the one it was (ApiVersions from the memo); while one
    is installed every request reaches it."""
    log: list[str] = []
    recording = Recording("only", log)
    with Broker() as b, KafkaSocket(b.bootstrap_servers) as s:
        assert b.runtime is not None
        dispatcher = b.runtime.dispatcher
        assert dispatcher.routes[ApiKey.API_VERSIONS].memoize
        b.runtime.loop.call_soon_threadsafe(dispatcher.install_interceptor, recording)
        for _ in range(3):
            s.call(ApiKey.API_VERSIONS, 3, SOFTWARE)
        assert log.count("only.before") == 3 and not dispatcher.routes[ApiKey.API_VERSIONS].memoize
        b.runtime.loop.call_soon_threadsafe(dispatcher.remove_interceptor, recording)
        s.call(ApiKey.API_VERSIONS, 3, SOFTWARE)
        assert log.count("only.before") == 3 and dispatcher.routes[ApiKey.API_VERSIONS].memoize


def test_answers_through_the_chain_equal_the_plain_path_byte_for_byte() -> None:
    """A chain that changes nothing changes no byte: the same conversation with a broker of the
    same id, cluster and port, with and without an interceptor."""
    requests: list[tuple[int, int, Mapping[str, Any]]] = [
        (ApiKey.API_VERSIONS, 3, SOFTWARE), (ApiKey.API_VERSIONS, 0, {}),
        (ApiKey.DESCRIBE_CLUSTER, 0, DESCRIBE_CLUSTER),
        (ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = {"broker.id": 5, "cluster.id": "same-cluster", "listeners": f"PLAINTEXT://127.0.0.1:{port}"}

    def conversation(broker: Broker) -> list[bytes]:
        with broker as b, KafkaSocket(b.bootstrap_servers) as s:
            answers = []
            for key, version, body in requests:
                s.send(key, version, body, correlation_id=7)
                answers.append(s.read_frame())
            return answers

    log: list[str] = []

    class Installs(Module):
        name = "installs"

        async def start(self) -> None:
            self.services.install_interceptor(Recording("a", log))

    plain = conversation(Broker(config))
    chained = conversation(Broker(config, modules=[Installs]))
    assert len(log) == 2 * len(requests)
    assert plain == chained
