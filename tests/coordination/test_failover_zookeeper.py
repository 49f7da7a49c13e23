"""Seed 001, section 10: coordinator failover on a real ZooKeeper.

Two brokers share one ZooKeeper chroot, both with the coordination module. Consumers register
with the elected coordinator and report consumed offsets in their Ping answers, which the
coordinator commits to /consumers/<group>/offsets/<topic>/<partition>. Then the coordinator broker
is stopped: the other broker wins /consumers/coordinator, the consumers re-discover it and
re-register, and their StartFetcher start offsets are the committed ones, read back from the
store (the consumers stop reporting offsets before the failover, so nothing else could carry them).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafkapy import Broker
from kafkapy.coordination.client import AssignedPartition, CoordinatedConsumer
from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey

ZK_SESSION_MS = 4000
CONSUMER_SESSION_MS = 1500
PARTITIONS = 4
TOPIC = "orders"
GROUP = "g"
CONFIG = {"kafkapy.modules": "coordination", "listeners": "PLAINTEXT://127.0.0.1:0",
          "zookeeper.session.timeout.ms": ZK_SESSION_MS,
          "coordinator.min.session.timeout.ms": 300, "coordinator.rebalance.backoff.ms": 100,
          "coordinator.offset.commit.interval.ms": 200}


async def until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def holder(zk: KazooClient) -> int:
    """The broker id in /consumers/coordinator, -1 when nobody holds it."""
    try:  # one read: the ephemeral node can vanish between an exists() and a get()
        return int(zk.get("/consumers/coordinator")[0].decode())
    except NoNodeError:
        return -1


def committed(zk: KazooClient) -> dict[int, int]:
    root = f"/consumers/{GROUP}/offsets/{TOPIC}"
    if zk.exists(root) is None:
        return {}
    return {int(p): int(zk.get(f"{root}/{p}")[0].decode()) for p in zk.get_children(root)}


@contextlib.contextmanager
def two_brokers(zk_connect: str) -> Iterator[tuple[Broker, Broker, KazooClient]]:
    """Brokers 1 and 2 on ZooKeeper (1 first, so it coordinates), the test topic, and a client of
    the same ZooKeeper; all closed afterwards, whichever the test already stopped."""
    first = Broker({**CONFIG, "zookeeper.connect": zk_connect, "broker.id": 1}).__enter__()
    second: Broker | None = None
    zk = KazooClient(hosts=zk_connect)  # after the first broker created the chroot
    try:
        zk.start(timeout=15)
        second = Broker({**CONFIG, "zookeeper.connect": zk_connect, "broker.id": 2}).__enter__()
        create_topic(first)
        yield first, second, zk
    finally:
        for b in (second, first):
            if b is not None:
                b.close()
        zk.stop()
        zk.close()


def test_coordinator_failover_keeps_groups_and_offsets(zk_connect: str) -> None:
    """The coordinator broker is stopped (Broker.close()): its session ends, the other broker wins."""
    with two_brokers(zk_connect) as (first, second, zk):
        stops = {1: first.close, 2: second.close}
        asyncio.run(asyncio.wait_for(_scenario(zk, {1: address(first), 2: address(second)}, stops,
                                               ZK_SESSION_MS / 1000 + 3), 90))


def test_coordinator_crash_failover_within_the_session_timeout(zk_connect: str) -> None:
    """The coordinator's process is killed (SIGKILL): its ephemeral /consumers/coordinator lingers
    until ZooKeeper expires the session, then the other broker is elected."""
    overrides = [f"{k}={v}" for k, v in {**CONFIG, "zookeeper.connect": zk_connect, "broker.id": 1}.items()]
    process = subprocess.Popen(
        [sys.executable, "-m", "kafkapy.cli", "serve", *(a for o in overrides for a in ("--override", o))],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    second: Broker | None = None
    zk = KazooClient(hosts=zk_connect)
    try:
        assert process.stderr is not None
        crashed = address_from_log(process.stderr)
        zk.start(timeout=15)
        wait_until(lambda: holder(zk) == 1, 10, "broker 1 (the subprocess) to be the coordinator")
        second = Broker({**CONFIG, "zookeeper.connect": zk_connect, "broker.id": 2}).__enter__()
        create_topic(second)

        def kill() -> None:
            process.kill()
            process.wait(10)

        # Election waits for the session to expire: up to the session timeout after the kill.
        asyncio.run(asyncio.wait_for(_scenario(zk, {1: crashed, 2: address(second)}, {1: kill},
                                               ZK_SESSION_MS / 1000 * 1.5 + 3), 90))
    finally:
        process.kill()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()
        if second is not None:
            second.close()
        zk.stop()
        zk.close()


def address(b: Broker) -> tuple[str, int]:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def address_from_log(stderr: IO[str], timeout: float = 30) -> tuple[str, int]:
    """The PLAINTEXT listener's address from `kafkapy serve`'s `listening on` log line."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = stderr.readline()
        if not line:
            break
        seen.append(line)
        if match := re.search(r"listening on PLAINTEXT://([^:\s]+):(\d+)", line):
            # keep draining stderr so the broker never blocks on a full pipe
            threading.Thread(target=lambda: stderr.read(), daemon=True).start()
            return match.group(1), int(match.group(2))
    raise AssertionError(f"kafkapy serve did not log its listener: {''.join(seen)}")


def create_topic(b: Broker) -> None:
    assert b.runtime is not None
    b.runtime.store.create_topic(TOPIC, {p: (1 + p % 2,) for p in range(PARTITIONS)})


async def _scenario(zk: KazooClient, brokers: dict[int, tuple[str, int]],
                    stop: dict[int, Callable[[], None]], election_deadline: float) -> None:
    """Consumers settle and commit; the coordinator is stopped with ``stop[its id]``; the other
    broker must hold /consumers/coordinator within ``election_deadline`` seconds."""
    bootstrap = list(brokers.values())
    # What each partition has been consumed up to; reported while `reporting` is on.
    position = {(TOPIC, p): 100 + 10 * p for p in range(PARTITIONS)}
    reporting = True
    starts: dict[str, list[list[AssignedPartition]]] = {}
    consumers: list[CoordinatedConsumer] = []

    def make(consumer_id: str) -> CoordinatedConsumer:
        starts[consumer_id] = []

        def offsets() -> dict[tuple[str, int], int]:
            if not reporting:
                return {}
            return {(p.topic, p.partition): position[(p.topic, p.partition)] for p in consumer.assignment}

        consumer = CoordinatedConsumer(bootstrap, GROUP, consumer_id, {TOPIC: 1},
                                       session_timeout_ms=CONSUMER_SESSION_MS, auto_offset_reset="smallest",
                                       on_assign=lambda parts: starts[consumer_id].append(parts),
                                       offsets=offsets, retry_backoff_ms=50)
        return consumer

    def owned() -> dict[int, str]:
        return {p.partition: c.consumer_id for c in consumers for p in c.assignment}

    def settled() -> bool:
        # every consumer registered and the group's partitions split among all of them
        return (all(c.registered.is_set() for c in consumers) and len(owned()) == PARTITIONS
                and set(owned().values()) == {c.consumer_id for c in consumers})

    consumers.extend([make("c1"), make("c2")])
    try:
        for c in consumers:
            c.start()
        old = await until(lambda: holder(zk) if holder(zk) in brokers else 0, 10, "a coordinator")
        await until(settled, 20, "c1 and c2 to split the partitions")
        assert all(p.offset == -1 for parts in starts.values() for p in parts[-1])  # nothing committed yet
        expected = {p: position[(TOPIC, p)] for p in range(PARTITIONS)}
        await until(lambda: committed(zk) == expected, 15, f"offsets {expected} in ZooKeeper")

        # From here on only the store knows the offsets.
        reporting = False
        for c in consumers:
            starts[c.consumer_id].clear()
        failed_at = time.monotonic()
        await asyncio.to_thread(stop[old])
        new = await until(lambda: holder(zk) if holder(zk) not in (-1, old) else 0,
                          election_deadline, "the other broker to win /consumers/coordinator")
        elected = time.monotonic() - failed_at
        assert new in brokers and new != old
        print(f"broker {new} elected {elected:.2f} s after broker {old} went")
        await until(lambda: settled() and all(c.coordinator_id == new for c in consumers), 30,
                    "the consumers to re-register with the new coordinator")
        for c in consumers:
            assert starts[c.consumer_id], f"{c.consumer_id} was never started again"
            assert all(p.offset == expected[p.partition] for p in c.assignment), (c.consumer_id,
                                                                                   c.assignment)
            assert {p.broker_id for p in c.assignment} <= {1, 2}
        assert committed(zk) == expected

        def owners() -> dict[tuple[str, int], str]:
            root = f"/consumers/{GROUP}/owners/{TOPIC}"
            if zk.exists(root) is None:
                return {}
            return {(TOPIC, int(p)): zk.get(f"{root}/{p}")[0].decode() for p in zk.get_children(root)}

        await until(lambda: owners() == {(TOPIC, p.partition): p.thread_id
                                         for c in consumers for p in c.assignment},
                    10, "the new coordinator to record ownership")
    finally:
        for c in consumers:
            await c.close()


class Counting(CoordinatedConsumer):
    """Records every coordinator request it answers: (loop time, API key)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[float, int]] = []

    async def answer(self, api_key: int, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        self.requests.append((asyncio.get_running_loop().time(), api_key))
        return await super().answer(api_key, body)

    def rounds(self, since: float) -> list[int]:
        """The StopFetcher/StartFetcher requests answered since ``since``, in order."""
        return [key for at, key in self.requests
                if at >= since and key in (ApiKey.STOP_FETCHER, ApiKey.START_FETCHER)]


def test_new_coordinator_waits_for_the_known_consumers_then_rebalances_once(zk_connect: str) -> None:
    """Seed 001, coordinator step 2: the new coordinator finds the group's last membership in
    ZooKeeper and rebalances once, when every known consumer is back or taken for dead.

    c1, c2 and c3 share the group. The coordinator broker is stopped; c1 re-registers at once, c2
    only after a back-off, and c3 never comes back (its process "died" with the coordinator). Seed:
    exactly one StopFetcher-StartFetcher round each for c1 and c2, not before c3's session timeout
    ran out (counted from the election), c1 never started alone in between."""
    with two_brokers(zk_connect) as (first, second, zk):
        asyncio.run(asyncio.wait_for(_wait_scenario(zk, {1: first, 2: second}), 90))


async def _wait_scenario(zk: KazooClient, brokers: dict[int, Broker]) -> None:
    session_ms = 3000
    bootstrap = [address(b) for b in brokers.values()]
    backoff = {"c1": 50, "c2": 700, "c3": 60_000}  # c3's back-off outlasts the test: it is gone
    consumers = {cid: Counting(bootstrap, GROUP, cid, {TOPIC: 1}, session_timeout_ms=session_ms,
                               retry_backoff_ms=ms) for cid, ms in backoff.items()}
    loop = asyncio.get_running_loop()

    def owned() -> dict[int, str]:
        return {p.partition: c.consumer_id for c in consumers.values() for p in c.assignment}

    try:
        for c in consumers.values():
            c.start()
        old = await until(lambda: holder(zk) if holder(zk) in brokers else 0, 10, "a coordinator")
        await until(lambda: set(owned().values()) == set(consumers) and len(owned()) == PARTITIONS, 20,
                    "c1, c2 and c3 to share the partitions")
        members = f"/consumers/{GROUP}/members"
        await until(lambda: zk.exists(members) and sorted(zk.get_children(members)) == ["c1", "c2", "c3"],
                    10, "the membership in ZooKeeper")

        stopped_at = loop.time()
        await asyncio.to_thread(brokers[old].close)
        await until(lambda: holder(zk) not in (-1, old), 15, "the other broker to win /consumers/coordinator")
        elected_at = loop.time()  # no earlier than the election itself (polled)
        c1, c2, c3 = consumers.values()
        await until(lambda: c1.rounds(stopped_at) == [ApiKey.STOP_FETCHER, ApiKey.START_FETCHER]
                    and c2.rounds(stopped_at) == [ApiKey.STOP_FETCHER, ApiKey.START_FETCHER], 15,
                    "one StopFetcher-StartFetcher round for c1 and c2")
        started_at = max(at for c in (c1, c2) for at, key in c.requests if key == ApiKey.START_FETCHER)
        # c3 was awaited for its session timeout from the election. elected_at is when the poll saw
        # it (later than the election: 0.5 s of slack for a loaded machine); c2 was back long before.
        assert started_at - elected_at >= session_ms / 1000 - 0.5, started_at - elected_at
        assert sorted(owned().values()) == ["c1", "c1", "c2", "c2"]
        assert c3.rounds(stopped_at) == []
        # and nothing else follows: wait one more session timeout, pings only
        await asyncio.sleep(session_ms / 1000)
        assert c1.rounds(stopped_at) == c2.rounds(stopped_at) == [ApiKey.STOP_FETCHER, ApiKey.START_FETCHER]
        assert sorted(zk.get_children(members)) == ["c1", "c2"]  # c3 is no longer known
    finally:
        for c in consumers.values():
            await c.close()


async def _register(b: Broker, group: str) -> int:
    """One RegisterConsumer over a raw connection: its error code."""
    reader, writer = await asyncio.open_connection(*address(b))
    try:
        body = {"group_id": group, "consumer_id": "raw", "auto_commit": False,
                "auto_offset_reset": "smallest",
                "topic_count": '{"version":1,"pattern":"static","subscription":{"orders":1}}',
                "session_timeout_ms": CONSUMER_SESSION_MS}
        frame = encode_request(ApiKey.REGISTER_CONSUMER, 0, 1, "raw", body)
        writer.write(len(frame).to_bytes(4, "big") + frame)
        await writer.drain()
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
        response = decode_response(await reader.readexactly(size), ApiKey.REGISTER_CONSUMER, 0)
        return int(response.body["error_code"])
    finally:
        writer.close()


BAD_GROUP_IDS = ["coordinator", "a/b", "a/b/c", ".", "..", "nul\x00", "tab\t", "\x85", "\ue000", "\U0001f600"]


def test_a_group_id_that_is_no_znode_of_its_own_is_refused(zk_connect: str) -> None:
    """/consumers/<group> holds a group's state: ``coordinator`` is the election node, ``a/b``
    would nest inside group ``a`` (a new coordinator reading /consumers never finds it), and ZooKeeper
    refuses ``.``, ``..`` and control or reserved characters. All refused with INVALID_GROUP_ID; a
    name ZooKeeper takes as it is (spaces, ``%``) works, and survives a failover."""
    group = "team a%2Fb"

    async def main(first: Broker, second: Broker, zk: KazooClient) -> None:
        for bad in BAD_GROUP_IDS:
            assert await _register(first, bad) == ErrorCode.INVALID_GROUP_ID, bad
        assert holder(zk) == 1
        assigned: list[list[AssignedPartition]] = []
        consumer = CoordinatedConsumer([address(first), address(second)], group, "c1", {TOPIC: 1},
                                       session_timeout_ms=CONSUMER_SESSION_MS, retry_backoff_ms=50,
                                       on_assign=assigned.append)
        consumer.start()
        try:
            await until(lambda: len(consumer.assignment) == PARTITIONS, 20, "c1 to own every partition")
            await until(lambda: zk.exists(f"/consumers/{group}/members/c1") is not None, 10, "membership")
            assert sorted(zk.get_children("/consumers")) == ["coordinator", group]
            await asyncio.to_thread(first.close)
            await until(lambda: holder(zk) == 2, 20, "broker 2 to be elected")
            assigned.clear()
            await until(lambda: assigned and len(consumer.assignment) == PARTITIONS, 20,
                        "c1 to be started again by broker 2")
            assert second.runtime is not None
            assert group in second.runtime.store.groups()
        finally:
            await consumer.close(graceful=False)

    with two_brokers(zk_connect) as (first, second, zk):
        asyncio.run(asyncio.wait_for(main(first, second, zk), 90))
