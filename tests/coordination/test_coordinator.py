"""Seed 001's broker-side consumer coordinator, end to end against served brokers."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.coordination.assignment import Subscription, SubscriptionError, range_assign
from kafkapy.coordination.client import AssignedPartition, CoordinatedConsumer
from kafkapy.coordination.module import CoordinationModule
from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_request, decode_response, encode_request, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store.memory import MemoryStore

SIZE = struct.Struct(">i")
SESSION_MS = 900
CONFIG = {"kafkapy.modules": "coordination", "coordinator.min.session.timeout.ms": 300,
          "coordinator.rebalance.backoff.ms": 100, "coordinator.offset.commit.interval.ms": 200}


def run(coro: Awaitable[None], timeout: float = 30.0) -> None:
    async def main() -> None:
        await asyncio.wait_for(coro, timeout)

    asyncio.run(main())


async def broker(store: MemoryStore | None = None, **extra: Any) -> Broker:
    return await Broker({**CONFIG, **extra}, store=store).start()


def address(b: Broker) -> tuple[str, int]:
    assert b.runtime is not None
    listener = b.runtime.listeners[0]
    return listener.host, listener.port


async def create_topic(b: Broker, name: str, partitions: int, leader: int = 1) -> None:
    assert b.runtime is not None
    await asyncio.to_thread(b.runtime.store.create_topic, name, {p: (leader,) for p in range(partitions)})


class Recorder:
    """A consumer plus the events its callbacks saw."""

    def __init__(self, b: Broker, consumer_id: str, topics: Mapping[str, int], **kwargs: Any) -> None:
        self.events: list[tuple[str, Any]] = []
        self.consumer = CoordinatedConsumer(
            [address(b)], "g", consumer_id, topics, session_timeout_ms=SESSION_MS,
            on_assign=lambda parts: self.events.append(("assign", parts)),
            on_revoke=lambda: self.events.append(("revoke", None)), retry_backoff_ms=50, **kwargs)

    def start(self) -> Recorder:
        self.consumer.start()
        return self

    @property
    def owned(self) -> list[tuple[str, int]]:
        return sorted((p.topic, p.partition) for p in self.consumer.assignment)


async def until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


# --- raw wire helpers -------------------------------------------------------------------------

async def call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int,
               body: Mapping[str, Any], correlation_id: int = 1) -> dict[str, Any]:
    frame = encode_request(api_key, 0, correlation_id, "raw", body)
    writer.write(SIZE.pack(len(frame)) + frame)
    await writer.drain()
    while True:
        data = await asyncio.wait_for(reader.readexactly(SIZE.unpack(await reader.readexactly(4))[0]), 5)
        if SIZE.unpack_from(data, 0)[0] == correlation_id:
            return dict(decode_response(data, api_key, 0).body)
        # anything else must be one of the coordinator's own requests (never a stray answer)
        assert decode_request(data).correlation_id >= 2**30, data


def registration(consumer_id: str = "c1", session: int = SESSION_MS, topic_count: str | None = None,
                 group: str = "g") -> dict[str, Any]:
    return {"group_id": group, "consumer_id": consumer_id,
            "topic_count": topic_count or Subscription("static", {"t": 1}).to_json(),
            "auto_commit": True, "auto_offset_reset": "smallest", "session_timeout_ms": session}


# --- pure parts -------------------------------------------------------------------------------

def test_range_assignor_matches_the_old_consumer() -> None:
    assert range_assign(range(5), ["b-0", "a-0"]) == {0: "a-0", 1: "a-0", 2: "a-0", 3: "b-0", 4: "b-0"}
    assert range_assign(range(2), ["a-0", "b-0", "c-0"]) == {0: "a-0", 1: "b-0"}
    assert range_assign(range(3), []) == {}


def test_topic_count_json() -> None:
    static = Subscription.parse('{"version":1,"pattern":"static","subscription":{"t":2}}')
    assert static.topic_streams(["t", "u"]) == {"t": 2}
    white = Subscription.parse('{"version":1,"pattern":"white_list","subscription":{"o.*":1}}')
    assert white.topic_streams(["orders", "x-orders"]) == {"orders": 1}
    black = Subscription.parse('{"version":1,"pattern":"black_list","subscription":{"o.*":3}}')
    assert black.topic_streams(["orders", "x"]) == {"x": 3}
    for bad in ("nope", "[]", '{"pattern":"regex","subscription":{"t":1}}', '{"subscription":{}}',
                '{"subscription":{"t":0}}', '{"pattern":"white_list","subscription":{"(":1}}',
                # Java's, but only a backtracking engine runs it: refused (kafkapy/server/patterns.py)
                '{"pattern":"black_list","subscription":{"(?!o).*":1}}'):
        with pytest.raises(SubscriptionError):
            Subscription.parse(bad)
    # Wildcards leave the internal topics out, as the old consumer's exclude.internal.topics
    # (default true) did; a static subscription may still name one.
    internal = ["__consumer_offsets", "__transaction_state", "__share_group_state"]
    everything = Subscription.parse('{"version":1,"pattern":"white_list","subscription":{".*":1}}')
    assert everything.topic_streams(["orders", *internal]) == {"orders": 1}
    assert black.topic_streams(["x", *internal]) == {"x": 3}
    named = Subscription.parse('{"version":1,"pattern":"static","subscription":{"__consumer_offsets":1}}')
    assert named.topic_streams(["orders", *internal]) == {"__consumer_offsets": 1}
    catastrophic = Subscription.parse('{"pattern":"white_list","subscription":{"(a+)+$":1}}')
    assert catastrophic.topic_streams(["a" * 40 + "b", "aaaa"]) == {"aaaa": 1}  # RE2: at once


_NAMES = ["t", "o.*", "(", "a{4294967296}"]
_topic_counts = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 1001)
    | st.sampled_from(["static", "white_list", "black_list", *_NAMES]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["version", "pattern", "subscription", *_NAMES]), inner, max_size=3),
    max_leaves=10).map(json.dumps)


@given(_topic_counts | st.text(max_size=30))
@example("[" * 100_000)  # was a RecursionError out of RegisterConsumer's handler
@example('{"pattern":"white_list","subscription":{"a{4294967296}":1}}')  # was an OverflowError
def test_any_topic_count_is_a_subscription_or_one_error(text: str) -> None:
    try:
        subscription = Subscription.parse(text)
    except SubscriptionError as refused:
        assert "\n" not in str(refused)
        return
    assert all(1 <= count <= 1000 for count in subscription.topic_streams(["t", "orders", "x"]).values())


# --- group management over real connections ----------------------------------------------------

def test_one_consumer_gets_every_partition_and_ownership_is_stored() -> None:
    async def main() -> None:
        b = await broker(**{"broker.id": 7})
        try:
            await create_topic(b, "t", 4, leader=7)
            r = Recorder(b, "c1", {"t": 1}).start()
            await until(lambda: len(r.owned) == 4, what="c1 owns t")
            parts = r.consumer.assignment
            assert {p.thread_id for p in parts} == {"c1-0"} and {p.broker_id for p in parts} == {7}
            assert all(p.offset == -1 for p in parts)  # nothing committed yet
            assert r.events[-1][0] == "assign"
            assert b.runtime is not None
            store = b.runtime.store
            # written once every StartFetcher is answered
            await until(lambda: store.owners("g") == {("t", p): "c1-0" for p in range(4)}, what="owners")
            await r.consumer.close()
        finally:
            await b.stop()

    run(main())


def test_second_consumer_splits_the_range_and_both_see_stop_then_start() -> None:
    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 4)
            r1 = Recorder(b, "c1", {"t": 1}).start()
            await until(lambda: len(r1.owned) == 4, what="c1 owns t")
            r1.events.clear()
            r2 = Recorder(b, "c2", {"t": 1}).start()
            await until(lambda: r1.owned == [("t", 0), ("t", 1)] and r2.owned == [("t", 2), ("t", 3)],
                        what="range split")
            assert [e for e, _ in r1.events] == ["revoke", "assign"]  # StopFetcher, then StartFetcher
            assert [e for e, _ in r2.events] == ["assign"]  # nothing to stop yet
            await r1.consumer.close()
            await r2.consumer.close()
        finally:
            await b.stop()

    run(main())


class Silent(CoordinatedConsumer):
    """Stops answering once muted, as a hung consumer would (it still reads its socket)."""

    muted = False

    async def answer(self, api_key: int, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if self.muted:
            return None
        return await super().answer(api_key, body)


def test_a_consumer_that_stops_answering_pings_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkapy.coordination")

    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 4)
            r1 = Recorder(b, "c1", {"t": 1}).start()
            await until(lambda: len(r1.owned) == 4)
            silent = Silent([address(b)], "g", "c2", {"t": 1}, session_timeout_ms=SESSION_MS,
                            retry_backoff_ms=5000)
            silent.start()
            await until(lambda: len(r1.owned) == 2 and len(silent.assignment) == 2, what="split")
            silent.muted = True
            await until(lambda: len(r1.owned) == 4, what="c1 owns all again")
            # dead after more than coordinator.max.ping.retries (1) failures in a row: the count the
            # coordinator acted on, not the seconds it took (about 4/3 session timeouts, on a quiet machine)
            assert "consumer g/c2 is dead (2 pings unanswered)" in caplog.text
            await r1.consumer.close()
            await silent.close()
        finally:
            await b.stop()

    run(main())


def test_a_disconnecting_consumer_triggers_a_rebalance() -> None:
    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 3)
            r1 = Recorder(b, "c1", {"t": 1}).start()
            r2 = Recorder(b, "c2", {"t": 1}).start()
            await until(lambda: len(r1.owned) + len(r2.owned) == 3 and r1.owned and r2.owned)
            await r2.consumer.close()
            await until(lambda: len(r1.owned) == 3, what="c1 owns all")
            await r1.consumer.close()
        finally:
            await b.stop()

    run(main())


def test_membership_is_recorded_for_the_next_coordinator() -> None:
    """Every rebalance records its members with their session timeouts, also one that changes no
    ownership (a consumer with no partitions leaving), which sends no StopFetcher or StartFetcher."""
    async def main() -> None:
        b = await broker()
        assert b.runtime is not None
        store = b.runtime.store
        try:
            await create_topic(b, "t", 2)
            r1, r2 = Recorder(b, "c1", {"t": 1}).start(), Recorder(b, "c2", {"t": 1}).start()
            await until(lambda: len(r1.owned) == 1 and len(r2.owned) == 1, what="split")
            r3 = Recorder(b, "c3", {"t": 1}).start()  # more consumers than partitions: c3 owns nothing
            await until(lambda: store.members("g") == {"c1": SESSION_MS, "c2": SESSION_MS, "c3": SESSION_MS},
                        what="three members recorded")
            owners = store.owners("g")
            seen = (list(r1.events), list(r2.events))
            await r3.consumer.close()
            await until(lambda: store.members("g") == {"c1": SESSION_MS, "c2": SESSION_MS},
                        what="c3 no longer recorded")
            assert store.owners("g") == owners
            # seed 001, rebalance step 3.5: the ownership is unchanged, so nobody is stopped or started
            assert (r1.events, r2.events) == seen
            await r1.consumer.close(graceful=False)
            await r2.consumer.close(graceful=False)
        finally:
            await b.stop()

    run(main())


def test_new_partitions_and_matching_topics_rebalance() -> None:
    async def main() -> None:
        b = await broker()
        assert b.runtime is not None
        try:
            await create_topic(b, "orders", 1)
            r = Recorder(b, "c1", {"ord.*": 2}, pattern="white_list").start()
            await until(lambda: r.owned == [("orders", 0)])
            await asyncio.to_thread(b.runtime.store.add_partitions, "orders", {1: (1,), 2: (1,)})
            await until(lambda: len(r.owned) == 3, what="new partitions")
            threads = {p.partition: p.thread_id for p in r.consumer.assignment}
            assert threads == {0: "c1-0", 1: "c1-0", 2: "c1-1"}
            await create_topic(b, "ordinals", 2)
            await create_topic(b, "unrelated", 2)
            await until(lambda: len(r.owned) == 5, what="new matching topic")
            assert {t for t, _ in r.owned} == {"orders", "ordinals"}
            await r.consumer.close()
        finally:
            await b.stop()

    run(main())


def test_offsets_from_pings_are_committed_and_used_as_start_offsets() -> None:
    async def main() -> None:
        b = await broker()
        assert b.runtime is not None
        store = b.runtime.store
        try:
            await create_topic(b, "t", 2)
            consumed = {("t", 0): 41, ("t", 1): 7}
            r1 = Recorder(b, "c1", {"t": 1}, offsets=lambda: consumed).start()
            await until(lambda: len(r1.owned) == 2)
            await until(lambda: store.offsets("g") == consumed, what="offsets committed")
            r2 = Recorder(b, "c2", {"t": 1}).start()
            await until(lambda: r2.owned == [("t", 1)])
            assert [p.offset for p in r2.consumer.assignment] == [7]
            await r1.consumer.close()
            await r2.consumer.close()
        finally:
            await b.stop()

    run(main())


def test_coordinator_failover_to_another_broker() -> None:
    async def main() -> None:
        store = MemoryStore()
        b1 = await broker(store, **{"broker.id": 1})
        b2 = await broker(store.peer(), **{"broker.id": 2})
        try:
            await create_topic(b1, "t", 2)
            consumer = CoordinatedConsumer([address(b1), address(b2)], "g", "c1", {"t": 1},
                                           session_timeout_ms=SESSION_MS, retry_backoff_ms=50)
            consumer.start()
            await until(lambda: len(consumer.assignment) == 2 and consumer.coordinator_id == 1)
            await b1.stop()  # the coordinator goes: broker 2 wins the election
            await until(lambda: consumer.coordinator_id == 2 and len(consumer.assignment) == 2
                        and consumer.registered.is_set(), what="re-registered with broker 2")
            await until(lambda: store.owners("g") == {("t", 0): "c1-0", ("t", 1): "c1-0"})
            await consumer.close()
        finally:
            await b2.stop()
            await b1.stop()

    run(main())


class ArrivalLog(CoordinatedConsumer):
    """Records when each Ping and StopFetcher arrived (loop time). ``answers_stops`` False: it
    never answers a StopFetcher (every rebalance attempt times out on it); ``slow``: a delay before
    its answer to the next StopFetcher."""

    def __init__(self, *args: Any, answers_stops: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pings: list[float] = []
        self.stops: list[float] = []
        self.answers_stops = answers_stops
        self.slow = 0.0

    async def answer(self, api_key: int, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        now = asyncio.get_running_loop().time()
        if api_key == ApiKey.PING:
            self.pings.append(now)
        elif api_key == ApiKey.STOP_FETCHER:
            self.stops.append(now)
            if not self.answers_stops:
                return None
            delay, self.slow = self.slow, 0.0
            await asyncio.sleep(delay)
        return await super().answer(api_key, body)


@pytest.mark.parametrize("auto_commit", [True, False])
def test_graceful_close_answers_a_ping_first(auto_commit: bool) -> None:
    """Seed 001, handlePingRequest step 1: on shutdown the consumer answers the next Ping (with its
    latest offsets), and with auto-commit waits for the Ping after that before it closes; so the
    offsets consumed up to close() reach the coordinator and its store."""
    async def main() -> None:
        b = await broker()
        assert b.runtime is not None
        store = b.runtime.store
        try:
            await create_topic(b, "t", 2)
            consumed = {("t", 0): 41, ("t", 1): 7}
            consumer = ArrivalLog([address(b)], "g", "c1", {"t": 1}, session_timeout_ms=SESSION_MS,
                                  auto_commit=auto_commit, offsets=lambda: consumed, retry_backoff_ms=50)
            consumer.start()
            await until(lambda: len(consumer.assignment) == 2 and consumer.registered.is_set())
            if auto_commit:
                await until(lambda: store.offsets("g") == consumed, what="offsets committed")
            consumed = {("t", 0): 99, ("t", 1): 8}  # consumed since the last Ping
            loop = asyncio.get_running_loop()
            began = loop.time()
            await consumer.close()
            ended = loop.time()
            answered = [at for at in consumer.pings if at >= began]
            assert len(answered) == 1, answered  # exactly one Ping answered during the shutdown
            interval = SESSION_MS / 3000  # the coordinator pings every session_timeout / 3
            if auto_commit:
                # it waited for the next Ping, and the last offsets got to the store
                assert ended - answered[0] >= 0.8 * interval, ended - answered[0]
                await until(lambda: store.offsets("g") == consumed, what="the last offsets committed")
            else:
                assert ended - answered[0] < 0.8 * interval, ended - answered[0]
                assert store.offsets("g") == {}
            assert ended - began < SESSION_MS / 1000  # bounded by the session timeout
        finally:
            await b.stop()

    run(main())


def test_close_without_a_coordinator_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    """A registered consumer whose coordinator stops pinging still closes within its session timeout."""
    caplog.set_level(logging.INFO, logger="kafkapy.coordination")

    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 1)
            consumer = Silent([address(b)], "g", "c1", {"t": 1}, session_timeout_ms=SESSION_MS,
                              retry_backoff_ms=5000)
            consumer.start()
            await until(lambda: len(consumer.assignment) == 1 and consumer.registered.is_set())
            consumer.muted = True  # answers nothing, so the handshake never completes
            loop = asyncio.get_running_loop()
            began = loop.time()
            await consumer.close()
            # It gave up waiting for the shutdown's Ping (the session timeout), nothing else ended it;
            # the bound only tells that wait from the 5 s retry backoff, with room for a loaded machine.
            assert "c1: no Ping during shutdown; closing anyway" in caplog.text
            assert loop.time() - began < 2 * SESSION_MS / 1000
            await consumer.close(graceful=False)  # closing again is harmless
        finally:
            await b.stop()

    run(main())


# --- raw-socket error paths -------------------------------------------------------------------

def test_cluster_metadata_and_registration_errors_keep_the_connection_open() -> None:
    async def main() -> None:
        store = MemoryStore()
        b1 = await broker(store, **{"broker.id": 1})
        b2 = await broker(store.peer(), **{"broker.id": 2})
        try:
            reader, writer = await asyncio.open_connection(*address(b2))
            meta = await call(reader, writer, 1000, {})
            assert meta["error_code"] == 0 and meta["coordinator_id"] == 1
            assert [(x["id"], x["port"]) for x in meta["brokers_info"]] == [(1, address(b1)[1]),
                                                                            (2, address(b2)[1])]
            # 16 NOT_COORDINATOR from a broker that is not the coordinator
            assert (await call(reader, writer, 1001, registration(), 2))["error_code"] == 16
            writer.close()

            reader, writer = await asyncio.open_connection(*address(b1))
            assert (await call(reader, writer, 1001, registration(session=100), 3))["error_code"] == 26
            assert (await call(reader, writer, 1001, registration(topic_count="{"), 4))["error_code"] == 42
            assert (await call(reader, writer, 1001, registration(group=""), 5))["error_code"] == 24
            assert (await call(reader, writer, 1001, registration(consumer_id=""), 5))["error_code"] == 42
            # one below coordinator.min.session.timeout.ms (300 here) is refused
            assert (await call(reader, writer, 1001, registration(session=299), 5))["error_code"] == 26
            assert (await call(reader, writer, 1001, registration(), 6))["error_code"] == 0
            # the coordinator now sends requests on this connection; a second consumer with the same
            # id on another connection is refused while this one is alive
            r2, w2 = await asyncio.open_connection(*address(b1))
            assert (await call(r2, w2, 1001, registration(), 7))["error_code"] == 82
            assert (await call(r2, w2, 1000, {}, 8))["error_code"] == 0  # still open
            w2.close()
            writer.close()
        finally:
            await b2.stop()
            await b1.stop()

    run(main())


BAD_GROUP_IDS = ["coordinator", "a/b", "/", "g/", ".", "..", "nul\x00", "tab\t", "del\x7f", "\x85",
                 "private\ue000", "special\ufff0", "emoji\U0001f600"]


@pytest.mark.parametrize("group", BAD_GROUP_IDS)
def test_a_group_id_that_cannot_be_a_znode_is_refused_on_the_memory_store_too(group: str) -> None:
    """/consumers/<group> must be one znode of its own: the memory store refuses what ZooKeeper
    would (tests/coordination/test_failover_zookeeper.py runs the same ids on a real one)."""

    async def main() -> None:
        b = await broker(MemoryStore())
        try:
            reader, writer = await asyncio.open_connection(*address(b))
            assert (await call(reader, writer, 1001, registration(group=group), 2))["error_code"] == 24
            assert (await call(reader, writer, 1000, {}, 3))["error_code"] == 0  # still open
            # names ZooKeeper takes as they are still register, dots, spaces and '%' included
            for n, fine in enumerate(["...", ".g", "coordinators", "a b%2F", "caf\u00e9"]):
                assert (await call(reader, writer, 1001, registration(group=fine), 4 + n))["error_code"] == 0
            writer.close()
            assert b.runtime is not None
            assert group not in b.runtime.store.groups()
        finally:
            await b.stop()

    run(main())


def test_coordinator_requests_arrive_on_the_consumer_connection() -> None:
    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 2)
            reader, writer = await asyncio.open_connection(*address(b))
            assert (await call(reader, writer, 1001, registration(), 1))["error_code"] == 0
            seen = []
            while len(seen) < 3:
                size = SIZE.unpack(await reader.readexactly(4))[0]
                data = await asyncio.wait_for(reader.readexactly(size), 5)
                request = decode_request(data)
                assert request.correlation_id >= 2**30 and request.client_id == "kafkapy-broker"
                seen.append(request.api_key)
                body: dict[str, Any] = {"request_type_id": request.api_key, "error_code": 0,
                                        "consumer_id": "c1"}
                if request.api_key == 1004:
                    parts = request.body["ownership_info"][0]["assigned_parts"]
                    assert [p["partition"] for p in parts] == ["1-0", "1-1"]
                frame = encode_response(request.api_key, 0, request.correlation_id, body)
                writer.write(SIZE.pack(len(frame)) + frame)
            assert seen[:2] == [1003, 1004]  # StopFetcher, StartFetcher
            assert seen[2] == 1002  # then pings
            # a ping left unanswered times out; the retry says so; the late answer to the first is
            # dropped rather than served as a request
            size = SIZE.unpack(await reader.readexactly(4))[0]
            first = decode_request(await asyncio.wait_for(reader.readexactly(size), 5))
            size = SIZE.unpack(await reader.readexactly(4))[0]
            retry = decode_request(await asyncio.wait_for(reader.readexactly(size), 5))
            assert (first.api_key, retry.api_key, retry.body["num_retries"]) == (1002, 1002, 1)
            for late in (first, retry):
                frame = encode_response(1002, 0, late.correlation_id, {"request_type_id": 1002,
                                                                       "error_code": 0, "consumer_id": "c1"})
                writer.write(SIZE.pack(len(frame)) + frame)
            assert (await call(reader, writer, 1000, {}, 9))["error_code"] == 0
            writer.close()
        finally:
            await b.stop()

    run(main())


def test_broker_correlation_ids_in_use_are_skipped_after_a_wrap() -> None:
    """Broker request ids count up from 2**30 and wrap below 2**31; one still awaited is never
    reused (it would hand its answer to the wrong request). The wrap is simulated by setting the
    connection's counter back onto the id of an unanswered StopFetcher."""
    async def main() -> None:
        b = await broker()
        assert b.runtime is not None
        try:
            await create_topic(b, "t", 1)
            reader, writer = await asyncio.open_connection(*address(b))
            assert (await call(reader, writer, 1001, registration(), 1))["error_code"] == 0
            stop = decode_request(await reader.readexactly(SIZE.unpack(await reader.readexactly(4))[0]))
            assert stop.api_key == 1003  # left unanswered for now
            (conn,) = [c for c in b.runtime.connections if stop.correlation_id in c.outstanding]
            conn._next_correlation = stop.correlation_id  # as if 2**30 requests later
            before = set(conn.outstanding)
            ping = asyncio.create_task(conn.request(1002, 0, {"consumer_id": "c1", "num_retries": 0}, 5))
            await asyncio.sleep(0)  # the request is sent, its id taken
            assert conn.outstanding[stop.correlation_id][0] == 1003  # still the StopFetcher's
            (ours,) = set(conn.outstanding) - before
            assert ours == stop.correlation_id + 1
            answers = {"request_type_id": 0, "error_code": 0, "consumer_id": "c1"}
            pending = [stop]
            while not ping.done() or pending:
                for request in pending:
                    frame = encode_response(request.api_key, 0, request.correlation_id,
                                            {**answers, "request_type_id": request.api_key})
                    writer.write(SIZE.pack(len(frame)) + frame)
                pending = []
                if not ping.done():
                    size = SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), 5))[0]
                    pending.append(decode_request(await reader.readexactly(size)))
            assert (await ping).correlation_id == ours
            writer.close()
        finally:
            await b.stop()

    run(main())


def test_not_served_unless_enabled() -> None:
    async def main() -> None:
        b = await Broker().start()
        try:
            reader, writer = await asyncio.open_connection(*address(b))
            frame = encode_request(1000, 0, 5, "raw", {})
            writer.write(SIZE.pack(len(frame)) + frame)
            data = await reader.readexactly(SIZE.unpack(await reader.readexactly(4))[0])
            assert data == SIZE.pack(5)  # the KIP-35 draft's empty answer to an unknown key
            writer.close()
        finally:
            await b.stop()

    run(main())


def test_assigned_partition_is_plain_data() -> None:
    p = AssignedPartition("c-0", "t", 1, 2, -1)
    assert json.dumps([p.topic, p.partition]) == '["t", 1]'


def _start_fetcher(consumer_id: str) -> dict[str, Any]:
    return {"consumer_id": consumer_id, "brokers_info": [{"id": 7, "host": "h", "port": 1}],
            "ownership_info": [{"consumer_thread_id": f"{consumer_id}-0", "assigned_parts": [
                {"topic": "t", "partition": "7-0", "offset": 40},
                {"topic": "t", "partition": "7-1", "offset": -1}]}]}


@pytest.mark.parametrize("with_callback", [True, False])
def test_stop_fetcher_answer_labels_the_partitions_it_just_released(with_callback: bool) -> None:
    """Seed 001: StopFetcher is answered after the fetchers stopped, with the offsets consumed on the
    partitions the consumer owned, each labelled ``<brokerId>-<partition>`` as in StartFetcher.
    The answer used to be built from the assignment already cleared by the revoke: broker -1 in
    every label, and nothing at all without an ``offsets`` callback."""
    consumed = {("t", 0): 42, ("t", 1): 3}
    seen: list[dict[tuple[str, int], int]] = []

    def offsets() -> dict[tuple[str, int], int]:
        seen.append(dict(consumed))
        return consumed

    async def main() -> None:
        consumer = CoordinatedConsumer([("127.0.0.1", 1)], "g", "c1", {"t": 1},
                                       offsets=offsets if with_callback else None,
                                       on_revoke=lambda: consumed.update({("t", 0): 43}))
        await consumer.answer(1004, _start_fetcher("c1"))
        answer = await consumer.answer(1003, {"consumer_id": "c1"})
        assert answer is not None and answer["error_code"] == 0
        if with_callback:  # asked after on_revoke: the final positions
            assert answer["offset_info"] == [{"topic": "t", "partition": "7-0", "offset": 43},
                                             {"topic": "t", "partition": "7-1", "offset": 3}]
        else:  # the start offsets it was given (partition 1 had none)
            assert answer["offset_info"] == [{"topic": "t", "partition": "7-0", "offset": 40}]
        assert consumer.assignment == []

    asyncio.run(main())


def test_a_silent_coordinator_is_left_after_the_session_timeout() -> None:
    """Seed 001, section 10: a consumer that hears no request (Ping, StopFetcher, StartFetcher) from
    its coordinator for session_timeout takes it for dead although the connection stays up: it
    stops fetching, closes the connection and starts over with ClusterMetadata. The coordinator
    here is a stand-in that assigns one partition and then says nothing more."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        registered: list[float] = []
        discovered: list[float] = []
        hung_up: list[float] = []  # the consumer closed a registered connection
        writers: list[asyncio.StreamWriter] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            port = writer.get_extra_info("sockname")[1]
            registered_here = False
            try:
                while True:
                    data = await reader.readexactly(SIZE.unpack(await reader.readexactly(4))[0])
                    if SIZE.unpack_from(data)[0] == 2**30:
                        continue  # the StartFetcher's answer
                    request = decode_request(data)
                    if request.api_key == 1000:
                        discovered.append(loop.time())
                        body: dict[str, Any] = {"error_code": 0, "coordinator_id": 1, "brokers_info": [
                            {"id": 1, "host": "127.0.0.1", "port": port}]}
                    else:
                        assert request.api_key == 1001
                        registered.append(loop.time())
                        registered_here = True
                        body = {"error_code": 0}
                    frame = encode_response(request.api_key, 0, request.correlation_id, body)
                    writer.write(SIZE.pack(len(frame)) + frame)
                    if request.api_key == 1001 and len(registered) == 1:
                        start = encode_request(1004, 0, 2**30, "kafkapy-broker", _start_fetcher("c1"))
                        writer.write(SIZE.pack(len(start)) + start)
            except asyncio.IncompleteReadError:
                if registered_here:
                    hung_up.append(loop.time())
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        events: list[str] = []
        consumer = CoordinatedConsumer([server.sockets[0].getsockname()[:2]], "g", "c1", {"t": 1},
                                       session_timeout_ms=SESSION_MS, retry_backoff_ms=50,
                                       on_assign=lambda parts: events.append("assign"),
                                       on_revoke=lambda: events.append("revoke"))
        consumer.start()
        try:
            await until(lambda: len(registered) == 2, what="a second registration")
            assert events == ["assign", "revoke"] and consumer.assignment == []
            # it waited the session timeout (from the StartFetcher, sent with the registration's
            # answer), then hung up and discovered the coordinator again before registering anew
            assert hung_up[0] - registered[0] >= 0.9 * SESSION_MS / 1000, hung_up[0] - registered[0]
            assert len(discovered) == 2 and hung_up[0] <= discovered[1] <= registered[1]
        finally:
            await consumer.close(graceful=False)
            server.close()
            for writer in writers:
                writer.close()
            await server.wait_closed()

    run(main())


def test_a_timed_out_rebalance_is_retried_after_the_backoff_then_given_up(
        caplog: pytest.LogCaptureFixture) -> None:
    """Seed 001, section 9 step 5: a StopFetcher not answered in time (2/3 of the session timeout)
    fails the attempt; the coordinator waits coordinator.rebalance.backoff.ms and tries again, and
    after coordinator.rebalance.max.retries retries logs the rebalance as failed and stops trying
    (the consumer answers its Pings, so it stays in the group)."""
    caplog.set_level(logging.INFO, logger="kafkapy.coordination")

    async def main() -> None:
        b = await broker(**{"coordinator.rebalance.max.retries": 2, "coordinator.rebalance.backoff.ms": 300})
        try:
            await create_topic(b, "t", 1)
            first = Recorder(b, "c1", {"t": 1}).start()
            await until(lambda: first.owned == [("t", 0)], what="c1 owns t")
            stuck = ArrivalLog([address(b)], "g", "c2", {"t": 1}, session_timeout_ms=SESSION_MS,
                               retry_backoff_ms=50, answers_stops=False)
            stuck.start()
            await until(lambda: "rebalance of group g failed after 3 attempts" in caplog.text, timeout=15,
                        what="the rebalance given up")
            assert len(stuck.stops) == 3
            reply_timeout, backoff = SESSION_MS * 2 / 3000, 0.3
            gaps = [later - earlier for earlier, later in zip(stuck.stops, stuck.stops[1:])]
            assert all(gap >= 0.9 * (reply_timeout + backoff) for gap in gaps), gaps
            await asyncio.sleep(reply_timeout + 2 * backoff)
            assert len(stuck.stops) == 3  # given up: no fourth attempt
            assert stuck.registered.is_set()  # still a member, pinged as usual
            await stuck.close(graceful=False)
            await first.consumer.close(graceful=False)
        finally:
            await b.stop()

    run(main())


def test_a_refused_consumer_closes_and_starts_over_until_it_is_accepted() -> None:
    """Seed 001: a consumer id is unique in its group (a second live one is refused), and a consumer
    whose registration is refused closes the connection itself and goes back to discovery; here it
    gets in once the holder of its id has left."""
    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 2)
            holder = Recorder(b, "c1", {"t": 1}).start()
            await until(lambda: len(holder.owned) == 2, what="the first c1 owns t")
            twin = Recorder(b, "c1", {"t": 1}).start()
            await until(lambda: twin.consumer.last_error == 82, what="the twin refused")
            assert not twin.consumer.registered.is_set() and holder.owned == [("t", 0), ("t", 1)]
            await holder.consumer.close()
            await until(lambda: twin.consumer.registered.is_set() and len(twin.owned) == 2,
                        what="the twin registered once the id was free")
            assert twin.consumer.last_error == 0
            await twin.consumer.close()
        finally:
            await b.stop()

    run(main())


def test_the_last_consumer_leaving_clears_the_group_record_and_commits() -> None:
    """Seed 001 rebalances a group after a consumer failure only if members are left. Here the last
    one leaving runs the bookkeeping half of a rebalance, with no request to anyone: its offsets are
    committed, and the recorded owners and members are cleared, so that a later coordinator does
    not wait for consumers that left (docs/coordination.md)."""
    async def main() -> None:
        b = await broker(**{"coordinator.offset.commit.interval.ms": 60_000})  # only the rebalance commits
        assert b.runtime is not None
        store = b.runtime.store
        try:
            await create_topic(b, "t", 2)
            consumed = {("t", 0): 5, ("t", 1): 6}
            consumer = ArrivalLog([address(b)], "g", "c1", {"t": 1}, session_timeout_ms=SESSION_MS,
                                  offsets=lambda: consumed, retry_backoff_ms=50)
            consumer.start()
            await until(lambda: store.members("g") == {"c1": SESSION_MS} and len(store.owners("g")) == 2,
                        what="c1 recorded")
            consumed = {("t", 0): 50, ("t", 1): 60}
            (module,) = [m for m in b.runtime.modules if isinstance(m, CoordinationModule)]
            await until(lambda: module.groups["g"].offsets == consumed, what="the new offsets in a Ping")
            assert store.offsets("g") != consumed  # not committed yet
            await consumer.close(graceful=False)
            await until(lambda: store.members("g") == {} and store.owners("g") == {}, what="record cleared")
            assert store.offsets("g") == consumed  # the last Ping's offsets, committed on the way out
        finally:
            await b.stop()

    run(main())


def test_a_late_answer_to_a_ping_given_up_by_a_reregistration_is_dropped() -> None:
    """A consumer registering again on its connection replaces its registration, and the Ping then
    awaited by the old one is given up. Its answer arriving afterwards is still the answer to a
    broker request: dropped, like any late answer. It used to be served as a request (API key
    16384 and up), which got an empty response the consumer could not read."""
    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 1)
            reader, writer = await asyncio.open_connection(*address(b))
            assert (await call(reader, writer, 1001, registration(), 1))["error_code"] == 0
            while True:  # answer the rebalance, then leave the first Ping waiting
                size = SIZE.unpack(await reader.readexactly(4))[0]
                request = decode_request(await reader.readexactly(size))
                if request.api_key == 1002:
                    break
                answer = {"request_type_id": request.api_key, "error_code": 0, "consumer_id": "c1"}
                frame = encode_response(request.api_key, 0, request.correlation_id, answer)
                writer.write(SIZE.pack(len(frame)) + frame)
            assert (await call(reader, writer, 1001, registration(), 2))["error_code"] == 0
            late = encode_response(1002, 0, request.correlation_id,
                                   {"request_type_id": 1002, "error_code": 0, "consumer_id": "c1"})
            writer.write(SIZE.pack(len(late)) + late)
            # what follows is the coordinator's own requests and the answer to this, nothing else
            assert (await call(reader, writer, 1000, {}, 3))["error_code"] == 0
            writer.close()
        finally:
            await b.stop()

    run(main())


def test_an_unreadable_frame_from_the_coordinator_is_a_broken_connection() -> None:
    """Seed 001: the consumer keeps trying until it is shut down. A frame from its coordinator that
    it cannot decode (garbage, an API it does not know) ends that connection like a broken one: it
    starts over with discovery. It used to end the consumer's task with the DecodeError, for good."""
    async def main() -> None:
        registrations = 0
        writers: list[asyncio.StreamWriter] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal registrations
            writers.append(writer)
            port = writer.get_extra_info("sockname")[1]
            try:
                while True:
                    size = SIZE.unpack(await reader.readexactly(4))[0]
                    request = decode_request(await reader.readexactly(size))
                    if request.api_key == 1000:
                        body: dict[str, Any] = {"error_code": 0, "coordinator_id": 1, "brokers_info": [
                            {"id": 1, "host": "127.0.0.1", "port": port}]}
                    else:
                        registrations += 1
                        body = {"error_code": 0}
                    frame = encode_response(request.api_key, 0, request.correlation_id, body)
                    writer.write(SIZE.pack(len(frame)) + frame)
                    if request.api_key == 1001:
                        # a request header of an unknown API, a frame too short for a header, a
                        # negative frame size
                        junk = [SIZE.pack(-7), SIZE.pack(10) + struct.pack(">hhih", 1099, 0, 2**30, -1),
                                SIZE.pack(2) + b"\x00\x01"][registrations % 3]
                        writer.write(junk)
            except asyncio.IncompleteReadError:
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        consumer = CoordinatedConsumer([server.sockets[0].getsockname()[:2]], "g", "c1", {"t": 1},
                                       session_timeout_ms=SESSION_MS, retry_backoff_ms=50)
        task = consumer.start()
        try:
            await until(lambda: registrations >= 4 or task.done(), what="registrations after junk")
            assert not task.done(), task.exception()
        finally:
            await consumer.close(graceful=False)
            server.close()
            for writer in writers:
                writer.close()
            await server.wait_closed()

    run(main())


def test_a_bootstrap_broker_answering_garbage_is_skipped() -> None:
    """Seed 001, consumer start-up step 1: a broker that does not answer ClusterMetadata properly
    is passed over for the next one in the list (here one sending a negative frame size, which
    used to end the consumer's task with a ValueError)."""
    async def main() -> None:
        async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(SIZE.unpack(await reader.readexactly(4))[0])
            writer.write(SIZE.pack(-1))
            await writer.drain()
            writer.close()

        bad = await asyncio.start_server(garbage, "127.0.0.1", 0)
        b = await broker()
        try:
            await create_topic(b, "t", 1)
            bootstrap = [bad.sockets[0].getsockname()[:2], address(b)]
            consumer = CoordinatedConsumer(bootstrap, "g", "c1", {"t": 1}, session_timeout_ms=SESSION_MS,
                                           retry_backoff_ms=50)
            task = consumer.start()
            await until(lambda: len(consumer.assignment) == 1 or task.done(), what="c1 assigned")
            assert not task.done(), task.exception()
            await consumer.close(graceful=False)
        finally:
            await b.stop()
            bad.close()
            await bad.wait_closed()

    run(main())


def test_a_consumer_leaving_during_a_rebalance_fails_it_at_once() -> None:
    """Seed 001, handleConsumerFailure step 4: when a consumer of a group fails while the group is
    being rebalanced, that rebalance fails directly and the one for the new membership starts. Here
    c2 takes 2.5 s to answer a StopFetcher (within its 4 s reply timeout); c1 leaves meanwhile, and
    the next rebalance's StopFetcher reaches c3 without waiting for c2's answer, which it used to."""
    async def main() -> None:
        b = await broker()
        loop = asyncio.get_running_loop()
        try:
            await create_topic(b, "t", 4)
            def consumer(consumer_id: str, session_ms: int = SESSION_MS) -> ArrivalLog:
                return ArrivalLog([address(b)], "g", consumer_id, {"t": 1}, session_timeout_ms=session_ms,
                                  retry_backoff_ms=50)

            c1, c2 = consumer("c1"), consumer("c2", 6000)
            c1.start()
            c2.start()
            await until(lambda: len(c1.assignment) == 2 and len(c2.assignment) == 2, what="c1, c2 settled")
            c2.slow, stopped = 2.5, len(c2.stops)
            c3 = consumer("c3")
            c3.start()
            await until(lambda: len(c3.stops) == 1 and len(c2.stops) > stopped, what="c3's rebalance begun")
            await c1.close(graceful=False)
            left = loop.time()
            await until(lambda: len(c3.stops) == 2, what="the next rebalance's StopFetcher")
            assert c3.stops[1] - left < 1.5, c3.stops[1] - left  # not after c2's answer to the first
            await until(lambda: len(c2.assignment) == 2 and len(c3.assignment) == 2, what="c2, c3 settled")
            await c2.close(graceful=False)
            await c3.close(graceful=False)
        finally:
            await b.stop()

    run(main())


def test_cluster_metadata_without_a_live_coordinator_says_so() -> None:
    """ClusterMetadata names the coordinator only when it is a live broker: while the one holding
    /consumers/coordinator is not registered (here a broker id no broker has), the answer is
    COORDINATOR_NOT_AVAILABLE (15) with coordinator_id -1, and the broker list still comes; a
    RegisterConsumer sent to this broker gets NOT_COORDINATOR (16)."""
    async def main() -> None:
        store = MemoryStore()
        store.peer().elect_coordinator(99)  # held by a broker that never registered
        b = await broker(store, **{"broker.id": 1})
        try:
            reader, writer = await asyncio.open_connection(*address(b))
            meta = await call(reader, writer, 1000, {})
            assert (meta["error_code"], meta["coordinator_id"]) == (15, -1)
            assert [x["id"] for x in meta["brokers_info"]] == [1]
            assert (await call(reader, writer, 1001, registration(), 2))["error_code"] == 16
            writer.close()
        finally:
            await b.stop()

    run(main())


def test_pings_come_every_third_of_the_session_timeout() -> None:
    """Seed 001, section 8: the coordinator pings each consumer every session_timeout / 3 (its own
    session timeout: here two consumers with different ones)."""
    async def main() -> None:
        b = await broker()
        try:
            await create_topic(b, "t", 2)
            fast = ArrivalLog([address(b)], "g", "fast", {"t": 1}, session_timeout_ms=600,
                              retry_backoff_ms=50)
            slow = ArrivalLog([address(b)], "g", "slow", {"t": 1}, session_timeout_ms=1500,
                              retry_backoff_ms=50)
            fast.start()
            slow.start()
            await until(lambda: len(slow.pings) >= 5, what="five pings to the slow one")
            for consumer, session_ms in ((fast, 600), (slow, 1500)):
                gaps = sorted(later - earlier for earlier, later in zip(consumer.pings, consumer.pings[1:]))
                median = gaps[len(gaps) // 2]
                third = session_ms / 3000
                assert 0.85 * third <= median <= 1.3 * third, (consumer.consumer_id, gaps)
            await fast.close(graceful=False)
            await slow.close(graceful=False)
        finally:
            await b.stop()

    run(main())


class StopOffsetsOnly(CoordinatedConsumer):
    """Reports its offsets in StopFetcher answers only (its Ping answers carry an empty list)."""

    async def answer(self, api_key: int, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        answer = await super().answer(api_key, body)
        if api_key == 1002 and answer is not None:
            return {**answer, "offset_info": []}
        return answer


def test_start_offsets_come_from_the_stop_fetcher_answers() -> None:
    """Seed 001: the StartFetcher after a rebalance carries, for each partition, the offset taken
    from the StopFetcher answers of that rebalance (committed on the way), so a partition moving to
    another consumer goes on where the last one stopped."""
    async def main() -> None:
        b = await broker()
        assert b.runtime is not None
        store = b.runtime.store
        try:
            await create_topic(b, "t", 2)
            consumed: dict[tuple[str, int], int] = {}
            first = StopOffsetsOnly([address(b)], "g", "c1", {"t": 1}, session_timeout_ms=SESSION_MS,
                                    offsets=lambda: consumed, retry_backoff_ms=50)
            first.start()
            await until(lambda: len(first.assignment) == 2, what="c1 owns t")
            consumed = {("t", 0): 17, ("t", 1): 29}  # known to nobody but c1 until it is stopped
            second = Recorder(b, "c2", {"t": 1}).start()
            await until(lambda: second.owned == [("t", 1)], what="c2 owns t-1")
            assert [(p.partition, p.offset) for p in second.consumer.assignment] == [(1, 29)]
            assert [(p.partition, p.offset) for p in first.assignment] == [(0, 17)]
            assert store.offsets("g") == consumed
            await first.close(graceful=False)
            await second.consumer.close(graceful=False)
        finally:
            await b.stop()

    run(main())


class RawConsumer:
    """One raw connection that answers every coordinator request with no error (and records it),
    and sends RegisterConsumer requests of its own on the same connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.seen: list[tuple[int, str]] = []  # (api key, consumer_id) of the coordinator's requests
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.task = asyncio.get_running_loop().create_task(self._serve())

    @classmethod
    async def open(cls, b: Broker) -> RawConsumer:
        return cls(*await asyncio.open_connection(*address(b)))

    async def _serve(self) -> None:
        while True:
            try:
                data = await self.reader.readexactly(SIZE.unpack(await self.reader.readexactly(4))[0])
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            correlation_id = SIZE.unpack_from(data, 0)[0]
            if correlation_id in self.waiting:
                self.waiting.pop(correlation_id).set_result(dict(decode_response(data, 1001, 0).body))
                continue
            request = decode_request(data)
            self.seen.append((request.api_key, request.body["consumer_id"]))
            answer = {"request_type_id": request.api_key, "error_code": 0,
                      "consumer_id": request.body["consumer_id"]}
            frame = encode_response(request.api_key, 0, request.correlation_id, answer)
            self.writer.write(SIZE.pack(len(frame)) + frame)

    async def register(self, body: Mapping[str, Any], correlation_id: int) -> int:
        answer = self.waiting[correlation_id] = asyncio.get_running_loop().create_future()
        frame = encode_request(1001, 0, correlation_id, "raw", body)
        self.writer.write(SIZE.pack(len(frame)) + frame)
        return int((await asyncio.wait_for(answer, 5))["error_code"])

    def close(self) -> None:
        self.task.cancel()
        self.writer.close()


def test_registering_in_another_group_moves_the_consumer_out_of_the_first() -> None:
    """Seed 001 has one registration per consumer connection (the coordinator pings and rebalances
    a consumer through the connection it registered on). A second RegisterConsumer on the same
    connection, for another group, moves the consumer: it leaves its first group, which is
    rebalanced without it, and is pinged for the new one only (docs/coordination.md)."""
    async def main() -> None:
        b = await broker()
        assert b.runtime is not None
        store = b.runtime.store
        (module,) = [m for m in b.runtime.modules if isinstance(m, CoordinationModule)]
        other = None
        raw = None
        try:
            await create_topic(b, "t", 2)
            other = Recorder(b, "c2", {"t": 1}).start()
            await until(lambda: other.owned == [("t", 0), ("t", 1)], what="c2 owning t")
            raw = await RawConsumer.open(b)
            assert await raw.register(registration("c1", group="g"), 1) == 0
            await until(lambda: store.members("g") == {"c1": SESSION_MS, "c2": SESSION_MS}
                        and len(other.owned) == 1, what="g split between c1 and c2")
            assert await raw.register(registration("c9", group="h"), 2) == 0
            moved = len(raw.seen)
            await until(lambda: other.owned == [("t", 0), ("t", 1)]
                        and store.members("g") == {"c2": SESSION_MS}
                        and store.members("h") == {"c9": SESSION_MS}, what="g rebalanced without c1")
            assert set(module.groups["g"].members) == {"c2"}
            await asyncio.sleep(SESSION_MS / 1000)  # a few pings' worth
            assert {cid for _, cid in raw.seen[moved:]} == {"c9"}, raw.seen[moved:]
            assert (1002, "c9") in raw.seen[moved:]
        finally:
            if raw is not None:
                raw.close()
            if other is not None:
                await other.consumer.close(graceful=False)
            await b.stop()

    run(main())


class SlowOffsets(MemoryStore):
    """Reading group h's offsets takes a while: two registrations creating h overlap."""

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        if group == "h":
            time.sleep(0.5)
        return super().offsets(group)


def test_a_refused_registration_keeps_the_connections_registration() -> None:
    """The seed has a refused RegisterConsumer change nothing (the consumer closes and starts
    over). A connection registered in g asking to register in a new group h, as a consumer id
    another connection took there meanwhile, gets FENCED_INSTANCE_ID and stays in g. It used to
    be dropped from g before the refusal (g rebalanced without it, no longer pinged)."""
    async def main() -> None:
        b = await broker(SlowOffsets())
        assert b.runtime is not None
        (module,) = [m for m in b.runtime.modules if isinstance(m, CoordinationModule)]
        first = second = None
        try:
            await create_topic(b, "t", 1)
            first = await RawConsumer.open(b)
            assert await first.register(registration("c1", group="g"), 1) == 0
            second = await RawConsumer.open(b)
            taken = asyncio.ensure_future(second.register(registration("c9", group="h"), 1))
            await asyncio.sleep(0.1)  # the second's registration reads h's offsets first
            assert await first.register(registration("c9", group="h"), 2) == ErrorCode.FENCED_INSTANCE_ID
            assert await taken == 0
            member = module.groups["g"].members.get("c1")
            assert member is not None and member.alive
            pinged = len(first.seen)
            await until(lambda: (1002, "c1") in first.seen[pinged:], what="c1 still pinged")
        finally:
            for raw in (first, second):
                if raw is not None:
                    raw.close()
            await b.stop()

    run(main())


def test_a_rebalance_cut_short_by_a_stopping_broker_leaves_no_unseen_error() -> None:
    """A StopFetcher still awaited when the consumer's connection closes and the broker stops in
    the same moment: the ask given up may end with the closed connection's error rather than
    cancelled. That error is seen; it was logged by asyncio as "Task exception was never
    retrieved" when the task was collected."""
    async def main() -> None:
        unseen: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: unseen.append(context))
        b = await broker()
        await create_topic(b, "t", 1)
        reader, writer = await asyncio.open_connection(*address(b))
        assert (await call(reader, writer, 1001, registration(), 1))["error_code"] == 0
        await asyncio.sleep(0.1)  # the StopFetcher is out, never answered
        writer.close()
        await b.stop()
        gc.collect()
        await asyncio.sleep(0.05)
        assert unseen == []

    run(main())
