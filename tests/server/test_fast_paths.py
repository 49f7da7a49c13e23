"""Each fast path (kafkapy.server.fastpaths) held equal to its plain path, and handlers in a task.

The same conversation, on several connections, with every fast path on, with each one off, and
with all off, against brokers of the same id, cluster and port: the bytes must be equal. Each
run also checks that the fast path it claims to use was really taken (or really not).
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Mapping
from typing import Any

import pytest
from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import Request, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.fastpaths import FastPaths
from kafkapy.server.interceptors import PASS, Interceptor, Pass
from kafkapy.server.modules import Answer, ApiHandler, Module, RequestContext

SOFTWARE = {"client_software_name": "fast-path-tests", "client_software_version": "1.0"}
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
CONVERSATION: list[tuple[int, int, Mapping[str, Any]]] = [
    *[(ApiKey.API_VERSIONS, v, SOFTWARE if v >= 3 else {}) for v in range(5)],
    *[(ApiKey.API_VERSIONS, v, SOFTWARE if v >= 3 else {}) for v in range(5)],  # memo hits
    (ApiKey.METADATA, 12, METADATA), (ApiKey.METADATA, 1, {"topics": None}),
    (ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}),
    (ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": 4, "resource_name": "3",  # a coroutine
                                                 "configuration_keys": ["broker.id", "log.dirs"]}],
                                  "include_synonyms": False, "include_documentation": False}),
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False}),
]


# An ApiVersions version no one knows (9): the v0 fallback answer, made by the dispatcher itself.
UNKNOWN_VERSION = bytearray(encode_request(ApiKey.API_VERSIONS, 0, 11, "fast-path-tests", {}))
UNKNOWN_VERSION[2:4] = (9).to_bytes(2, "big")
FRAMES = [encode_request(key, version, 11, "fast-path-tests", body) for key, version, body in CONVERSATION]
FRAMES.insert(10, bytes(UNKNOWN_VERSION))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def conversation(fast_paths: FastPaths, port: int) -> tuple[list[bytes], Broker]:
    """Every answer, on three connections in turn, all requests of one connection in one write."""
    config = {"broker.id": 3, "cluster.id": "fast-path-cluster", "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    answers = []
    with Broker(config, fast_paths=fast_paths) as b:
        for _ in range(3):
            with KafkaSocket(b.bootstrap_servers) as s:
                s.send_raw(b"".join(len(frame).to_bytes(4, "big") + frame for frame in FRAMES))
                answers += [s.read_frame() for _ in FRAMES]
        assert b.runtime is not None
        runtime = b.runtime
        assert bool(runtime.dispatcher.memo.tables.get(ApiKey.API_VERSIONS.to_bytes(2, "big") + b"\0\3")) \
            == fast_paths.memo
        assert (runtime._make_transport is not None) == fast_paths.in_place_accept
        assert (runtime.start_eagerly.__name__ == "start") == fast_paths.eager
    return answers, b


PLAIN_VARIANTS = {"all off": FastPaths.none(), "memo off": FastPaths(memo=False),
                  "in-place accept off": FastPaths(in_place_accept=False),
                  "eager off": FastPaths(eager=False), "buffered reads off": FastPaths(buffered_reads=False)}


@pytest.mark.parametrize("plain", PLAIN_VARIANTS.values(), ids=PLAIN_VARIANTS.keys())
def test_a_fast_path_answers_byte_for_byte_as_its_plain_path(plain: FastPaths) -> None:
    port = _free_port()
    fast, _ = conversation(FastPaths(), port)
    slow, _ = conversation(plain, port)
    assert len(fast) == 3 * len(FRAMES)
    assert fast == slow


# --- frames that span reads, kept as received (kept_frames) --------------------------------------

@functools.cache  # the same bytes (timestamps) for both brokers
def _big_batch(tag: bytes, records: int, corrupt: bool = False) -> bytes:
    batch = bytearray(build_record_batch([{"key": tag + b"%d" % i, "value": bytes([i % 251]) * 300}
                                          for i in range(records)]))
    if corrupt:
        batch[-1] ^= 0xFF  # its CRC fails: declined by the fast path, refused by the plain one
    return bytes(batch)


def large_frames(fast_paths: FastPaths, port: int) -> list[bytes]:
    """Produces larger than a read (asyncio reads at most 256 KiB) in one write with small frames,
    then the partition fetched back: every answer's bytes."""
    config = {"broker.id": 3, "cluster.id": "fast-path-cluster", "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    produces = [encode_request(ApiKey.PRODUCE, version, 21 + i, "fast-path-tests", {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000,
        "topic_data": [{"name": "big", "partition_data": [{"index": 0, "records": batch}]}]})
        for i, (version, batch) in enumerate([(9, _big_batch(b"a", 2000)), (7, _big_batch(b"b", 900)),
                                              (9, _big_batch(b"c", 1500, corrupt=True)),
                                              (9, _big_batch(b"d", 60))])]
    fetch = encode_request(ApiKey.FETCH, 12, 40, "fast-path-tests", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": "big", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                     "fetch_offset": 0, "last_fetched_epoch": -1,
                                                     "log_start_offset": -1,
                                                     "partition_max_bytes": 50 << 20}]}]})
    frames = [FRAMES[0], *produces[:2], FRAMES[0], *produces[2:]]
    with Broker(config, fast_paths=fast_paths) as b:
        b.seed({"big": {"partitions": 1}})
        with KafkaSocket(b.bootstrap_servers) as s:
            s.send_raw(b"".join(len(frame).to_bytes(4, "big") + frame for frame in frames))
            answers = [s.read_frame() for _ in frames]
            s.send_raw(len(fetch).to_bytes(4, "big") + fetch)
            answers.append(s.read_frame())
    return answers


def test_frames_that_span_reads_answer_and_store_as_the_plain_path() -> None:
    port = _free_port()
    kept = large_frames(FastPaths(), port)
    plain = large_frames(FastPaths(kept_frames=False), port)
    assert kept == plain
    assert large_frames(FastPaths(buffered_reads=False), port) == plain  # read through data_received
    stored = kept[-1]
    assert b"a1999" in stored and b"b899" in stored and b"d59" in stored and b"c0" not in stored


# --- handlers run in a task from their first line -------------------------------------------------

class UsesTimeouts(Module):
    """StreamsGroupDescribe (no built-in module serves it): asyncio.timeout before its first
    suspension, and one that fires after."""

    name = "uses-timeouts"

    def apis(self) -> Mapping[int, ApiHandler]:
        return {ApiKey.STREAMS_GROUP_DESCRIBE: ApiHandler(VersionRange(0, 0), self.describe_groups)}

    async def on_request(self, context: RequestContext, request: Request) -> None:
        async with asyncio.timeout(1):  # a hook, too, before anything suspends
            await asyncio.sleep(0)

    async def describe_groups(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        assert asyncio.current_task() is not None
        async with asyncio.timeout(1):  # first line: no suspension before it
            await asyncio.sleep(0.01)
        try:
            async with asyncio.timeout(0.05):  # after suspending: and it fires
                await asyncio.sleep(5)
            state = "not timed out"
        except TimeoutError:
            state = "timed out"
        group = {"error_code": ErrorCode.NONE, "group_id": request.body["group_ids"][0], "group_state": state,
                 "members": []}
        return {"throttle_time_ms": 0, "groups": [group]}


class TimesOutBefore(Interceptor):
    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        async with asyncio.timeout(1):
            await asyncio.sleep(0)
        return PASS


class InstallsTimingInterceptor(Module):
    name = "installs-timing-interceptor"

    async def start(self) -> None:
        self.services.install_interceptor(TimesOutBefore())


class PassesInPlace(Interceptor):
    """Allows the chain to be stepped in place, and never suspends: the coroutine handler inside
    it must still start in the worker task (kafkapy.server.eager.into_task)."""

    steps_in_place = True


class UsesTimeoutsWithoutHook(UsesTimeouts):
    name = "uses-timeouts-without-hook"
    on_request = Module.on_request  # no module hook: the chain may be stepped in place


class InstallsInPlaceInterceptor(Module):
    name = "installs-in-place-interceptor"

    async def start(self) -> None:
        self.services.install_interceptor(PassesInPlace())


@pytest.mark.parametrize("modules", [[UsesTimeouts], [UsesTimeouts, InstallsTimingInterceptor],
                                     [UsesTimeoutsWithoutHook, InstallsInPlaceInterceptor]],
                         ids=["handler and hook", "and an interceptor", "in an in-place chain"])
def test_handlers_hooks_and_interceptors_may_use_asyncio_timeout(modules: list[type[Module]]) -> None:
    """Sent on an idle connection (the path that answers in place), twice, with a pipelined
    request behind: the timeouts work, nothing closes, order holds."""
    with Broker(modules=modules) as b, KafkaSocket(b.bootstrap_servers) as s:
        for _ in range(2):
            first = s.send(ApiKey.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": ["g"]})
            behind = s.send(ApiKey.API_VERSIONS, 3, SOFTWARE)
            answer = s.read_response(ApiKey.STREAMS_GROUP_DESCRIBE, 0)
            assert answer.correlation_id == first
            assert answer.body["groups"][0]["group_state"] == "timed out"
            assert s.read_response(ApiKey.API_VERSIONS, 3).correlation_id == behind


class WaitsOnAccept(Module):
    """An on_accept hook that waits with a timeout before anything suspends: asyncio.wait_for (on
    Python 3.12+ asyncio.timeout() inside, which raises outside a task) and asyncio.timeout."""

    name = "waits-on-accept"
    accepted = 0

    async def on_accept(self, connection: ConnectionInfo) -> bool:
        await asyncio.wait_for(asyncio.sleep(0), 1)
        async with asyncio.timeout(1):
            await asyncio.sleep(0)
        WaitsOnAccept.accepted += 1
        return True


def test_an_on_accept_hook_may_use_timeouts_from_its_first_line() -> None:
    """Admission is stepped in place (the ``eager`` fast path); a hook still runs in a task, so the
    connection is served rather than closed as 'admitting ... failed'."""
    WaitsOnAccept.accepted = 0
    with Broker(modules=[WaitsOnAccept]) as b:
        for _ in range(2):
            with KafkaSocket(b.bootstrap_servers) as s:
                sent = s.send(ApiKey.API_VERSIONS, 3, SOFTWARE)
                assert s.read_response(ApiKey.API_VERSIONS, 3).correlation_id == sent
    assert WaitsOnAccept.accepted == 2
