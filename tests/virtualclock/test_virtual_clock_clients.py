"""The virtual clock with real clients (issue 18's proof): a consumer group rebalances, an open
transaction is aborted, retention deletes a segment and an idle connection is closed, each when
the clock is advanced past its timeout, with no real waiting for it."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from quick_clients import (
    HEARTBEAT_MS,
    KAFKA_PYTHON_CLIENT,
    RDKAFKA_CLIENT,
    RDKAFKA_WAKE,
    warm_transaction_coordinator,
)

from kafkapy import VirtualClock
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.faults import FaultRule, Stall
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.clock import wait_real
from kafkapy.testing import BrokerFactory, wait_until

kafka = pytest.importorskip("kafka")
T = TypeVar("T")

IDLE_MS = 10_000  # connections.max.idle.ms for the idle test (Kafka's default is 10 minutes)
SESSION_MS = 10_000  # the consumers' session.timeout.ms (Kafka's default is 45 s)
STEP_S = 2.0  # advance in steps shorter than a session, so the live member can heartbeat in between


def _api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"idle"
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _still_open(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable  # the broker wrote nothing, and did not close it


def test_an_idle_connection_is_closed_once_the_clock_passes_connections_max_idle_ms(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"connections.max.idle.ms": IDLE_MS})
    host, port = broker.bootstrap_servers.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_api_versions_v0(1))
        assert sock.recv(4)  # answered: the connection is served
        sock.recv(65536)
        kafka_clock.advance(IDLE_MS / 1000 - 0.5)
        assert _still_open(sock)
        started = time.monotonic()
        kafka_clock.advance(1.0)  # the idle sweep runs at most a (virtual) second apart
        sock.settimeout(5)
        assert sock.recv(1) == b""  # closed by the broker
        assert time.monotonic() - started < 2  # it did not wait IDLE_MS real milliseconds


def test_retention_ms_deletes_a_segment_after_advance(kafka_clock: VirtualClock,
                                                      kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"log.retention.check.interval.ms": 1000})
    broker.seed({"aged": {"partitions": 1, "config": {"retention.ms": "60000", "segment.bytes": "200"}}})
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0,
                                   **KAFKA_PYTHON_CLIENT)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, **KAFKA_PYTHON_CLIENT)
    def send() -> None:
        producer.send("aged", value=b"x" * 60, partition=0, timestamp_ms=int(kafka_clock.wall() * 1000))
        producer.flush(10)

    try:
        for _ in range(3):  # two batches do not fit in 200 bytes: each gets a segment of its own
            send()
        partition = kafka.TopicPartition("aged", 0)
        assert consumer.beginning_offsets([partition])[partition] == 0
        kafka_clock.advance(55)
        assert consumer.beginning_offsets([partition])[partition] == 0  # 55 s old: kept
        send()  # offset 3, 55 s younger than the others
        kafka_clock.advance(10)  # 65 s old, and a retention check has run since
        assert consumer.beginning_offsets([partition])[partition] == 3
        assert [record.offset for record in broker.records("aged")] == [3]
        kafka_clock.advance(60)  # now the last one too, though it is in the active segment (as Kafka)
        assert consumer.beginning_offsets([partition])[partition] == 4
        assert broker.records("aged") == []
    finally:
        producer.close()
        consumer.close()


def _abandoned_transaction(kafka_broker_factory: BrokerFactory) -> tuple[Broker, Any]:
    """A broker with topic "orders", and a confluent-kafka producer that has sent a record there
    in a transaction it leaves open (no commit, no abort) and gone quiet."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = kafka_broker_factory({"transaction.state.log.num.partitions": 1})
    broker.seed({"orders": {"partitions": 1}})
    warm_transaction_coordinator(broker.bootstrap_servers)
    stuck = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                      "transactional.id": "stuck", "transaction.timeout.ms": 60_000,
                                      **RDKAFKA_CLIENT})
    stuck.init_transactions(20)
    stuck.begin_transaction()
    stuck.produce("orders", value=b"never committed", partition=0)
    stuck.flush(10)
    return broker, stuck


def test_an_open_transaction_is_aborted_after_transaction_timeout_ms(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker, _stuck = _abandoned_transaction(kafka_broker_factory)
    plain = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **KAFKA_PYTHON_CLIENT)
    # fetch_max_wait_ms=0: each Fetch is answered at once, so "nothing yet" below is a Fetch
    # answered with nothing, not one still waiting out its max wait on the frozen clock
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, client_id="committed-reader",
                                   isolation_level="read_committed", auto_offset_reset="earliest",
                                   fetch_max_wait_ms=0, **KAFKA_PYTHON_CLIENT)
    try:
        plain.send("orders", value=b"after", partition=0).get(timeout=10)
        consumer.assign([kafka.TopicPartition("orders", 0)])
        before_abort: list[bytes] = []

        def answered_twice() -> bool:  # the consumer sends its next Fetch once it has read the last answer
            before_abort.extend(_values(consumer, 0.05))
            return _answered(broker, "committed-reader", ApiKey.FETCH) >= 2

        wait_until(answered_twice, what="two Fetches answered")
        before_abort.extend(_values(consumer, 0.05))
        assert before_abort == []  # read_committed stops at the open transaction
        started = time.monotonic()
        # The coordinator looks for timed-out transactions every 10 s
        # (transaction.abort.timed.out.transaction.cleanup.interval.ms, Kafka's default).
        kafka_clock.advance(70)
        got = wait_until(lambda: _values(consumer, 0.1), what="the records after the aborted transaction")
        assert got == [b"after"]
        assert time.monotonic() - started < 10
        aborted = [r for r in broker.records("orders") if r.is_control]
        assert len(aborted) == 1 and aborted[0].producer_id >= 0
    finally:
        consumer.close()
        plain.close()


def test_committed_offsets_expire_after_offsets_retention_minutes(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"offsets.retention.minutes": 1,
                                   "offsets.retention.check.interval.ms": 1000})
    broker.seed({"ledger": {"partitions": 1, "records": [{"value": "a"}, {"value": "b"}]}})
    partition = kafka.TopicPartition("ledger", 0)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="auditors",
                                   enable_auto_commit=False, **KAFKA_PYTHON_CLIENT)
    try:
        consumer.assign([partition])  # no subscription: a group that only commits (Kafka's "simple" group)
        consumer.commit({partition: kafka.OffsetAndMetadata(2, "", -1)})
        kafka_clock.advance(55)
        assert consumer.committed(partition) == 2
        kafka_clock.advance(10)  # past a minute since the commit, and a check has run
        assert consumer.committed(partition) is None
    finally:
        consumer.close()


def _active_producers(broker: Broker, topic: str) -> list[int]:
    with SimpleClient(broker.bootstrap_servers) as client:
        body = client.request(ApiKey.DESCRIBE_PRODUCERS, 0,
                              {"topics": [{"name": topic, "partition_indexes": [0]}]})
    [partition] = body["topics"][0]["partitions"]
    return [producer["producer_id"] for producer in partition["active_producers"]]


def test_an_idle_producer_id_expires_after_producer_id_expiration_ms(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"producer.id.expiration.ms": 60_000,
                                   "producer.id.expiration.check.interval.ms": 1000})
    broker.seed({"events": {"partitions": 1}})
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True,
                                   **KAFKA_PYTHON_CLIENT)
    try:
        now_ms = int(kafka_clock.wall() * 1000)
        producer.send("events", value=b"once", partition=0, timestamp_ms=now_ms).get(10)
        [producer_id] = _active_producers(broker, "events")
        assert producer_id >= 0
        kafka_clock.advance(55)
        assert _active_producers(broker, "events") == [producer_id]
        kafka_clock.advance(10)  # its last batch is over a minute old, and a check has run
        assert _active_producers(broker, "events") == []
    finally:
        producer.close()


def _values(consumer: Any, seconds: float) -> list[bytes]:
    polled = consumer.poll(timeout_ms=int(seconds * 1000))
    return [record.value for records in polled.values() for record in records]


# -- the group: one member in another process, stopped with SIGSTOP ------------------------------

_MEMBER = textwrap.dedent("""
    import sys, confluent_kafka
    consumer = confluent_kafka.Consumer({"bootstrap.servers": sys.argv[1], "group.id": "workers",
                                         "client.id": "stopped", "session.timeout.ms": int(sys.argv[2]),
                                         "heartbeat.interval.ms": int(sys.argv[3])})
    consumer.subscribe(["jobs"])
    shown = None
    while True:
        consumer.poll(0.05)
        assigned = sorted(p.partition for p in consumer.assignment())
        if assigned != shown:
            print(",".join(map(str, assigned)), flush=True)
            shown = assigned
""")


@pytest.fixture
def member_process(kafka_broker: Broker) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen([sys.executable, "-c", _MEMBER, kafka_broker.bootstrap_servers,
                                str(SESSION_MS), str(HEARTBEAT_MS)], stdout=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()


def _line(process: subprocess.Popen[str], timeout: float) -> str | None:
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], timeout)
    return process.stdout.readline().strip() if readable else None


def _polled(consumer: Any) -> bool:
    """Let a confluent-kafka consumer serve its rebalance callbacks for a moment; True."""
    consumer.poll(0.02)
    return True


def _answered(broker: Broker, client_id: str, api_key: ApiKey) -> int:
    return sum(1 for e in broker.history(client_id=client_id) if e.api_key == api_key and e.answered)


def _heartbeats(broker: Broker, client_id: str) -> int:
    return _answered(broker, client_id, ApiKey.HEARTBEAT)


@pytest.mark.kafka_seed({"jobs": {"partitions": 4}})
def test_a_group_rebalances_to_the_live_member_when_the_clock_passes_the_session_timeout(
        kafka_clock: VirtualClock, kafka_broker: Broker, member_process: subprocess.Popen[str]) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    live = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                     "group.id": "workers", "client.id": "live",
                                     "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                                     # not RDKAFKA_CLIENT's 100 ms metadata refresh: on a frozen clock
                                     # a Metadata queued behind this consumer's parked Fetch never
                                     # comes back, and librdkafka's rejoin waits for it; the wake-up
                                     # timer sends nothing, and its heartbeats keep their interval
                                     **RDKAFKA_WAKE})
    live.subscribe(["jobs"])
    try:
        shown = ""

        def split() -> bool:  # both members have two partitions each
            nonlocal shown
            live.poll(0.02)
            line = _line(member_process, 0)
            shown = line if line is not None else shown
            return len(live.assignment()) == 2 and len(shown.split(",")) == 2

        wait_until(split, timeout=30, what="the two members to share the partitions")
        os.kill(member_process.pid, signal.SIGSTOP)  # it holds its connections but sends nothing more
        started = time.monotonic()
        for _ in range(int(SESSION_MS / 1000 / STEP_S) + 1):
            seen = _heartbeats(kafka_broker, "live")
            kafka_clock.advance(STEP_S)
            wait_until(lambda seen=seen: _polled(live) and _heartbeats(kafka_broker, "live") > seen,
                       what="a heartbeat from the live member")
            if kafka_clock.time() < SESSION_MS / 1000:  # the stopped member's session has not run out yet
                assert len(live.assignment()) == 2
        wait_until(lambda: _polled(live) and len(live.assignment()) == 4,
                   what="the live member to own every partition")
        assert time.monotonic() - started < SESSION_MS / 1000  # the session ran out on the clock alone
        kafka_clock.advance(STEP_S)  # the live member stays: it heartbeats in every step
        wait_until(lambda: _polled(live) and len(live.assignment()) == 4, what="the live member to stay")
    finally:
        live.close()


@pytest.mark.kafka_seed({"jobs": {"partitions": 4}})
def test_a_member_whose_heartbeats_stall_loses_its_partitions_in_process(
        kafka_clock: VirtualClock, kafka_broker: Broker) -> None:
    """docs/testing.md's in-process stuck member: a Stall on one client's Heartbeats (and so on
    whatever follows them on its coordinator connection) instead of a SIGSTOPped process."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    settings = {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "stuck-or-not",
                "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS, **RDKAFKA_WAKE}
    live = confluent_kafka.Consumer({**settings, "client.id": "live"})
    stuck = confluent_kafka.Consumer({**settings, "client.id": "stuck"})
    try:
        for consumer in (live, stuck):
            consumer.subscribe(["jobs"])
        wait_until(lambda: _polled(live) and _polled(stuck) and len(live.assignment()) == 2
                   and len(stuck.assignment()) == 2, timeout=30, what="the members to share the partitions")
        before = kafka_broker.group("stuck-or-not")
        assert before is not None
        with kafka_broker.faults.injected(FaultRule(Stall(), api=ApiKey.HEARTBEAT, client_id="stuck")):
            for _ in range(int(SESSION_MS / 1000 / STEP_S) + 1):
                seen = _heartbeats(kafka_broker, "live")
                kafka_clock.advance(STEP_S)
                wait_until(lambda seen=seen: _polled(live) and _heartbeats(kafka_broker, "live") > seen,
                           what="a heartbeat from the live member")
            wait_until(lambda: _polled(live) and len(live.assignment()) == 4,
                       what="the live member to own every partition")
            after = kafka_broker.group("stuck-or-not")
            assert after is not None and [m.client_id for m in after.members] == ["live"]
            assert after.generation > before.generation
    finally:
        live.close()
        stuck.close()


async def _send_once(bootstrap_servers: str, topic: str, value: bytes) -> None:
    """One aiokafka producer's send, on the running loop (the topic is made by it if need be)."""
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


def test_an_asyncio_client_on_a_loop_of_its_own_keeps_real_time(kafka_clock: VirtualClock,
                                                                kafka_broker: Broker) -> None:
    """docs/testing.md's pattern for aiokafka: the broker on the clock's loop, the client on
    asyncio.run's. Its first send to a topic it auto-creates is retried after retry_backoff_ms,
    which on the clock's own loop would wait for an advance that never comes (unless the clock
    autojumps: see the tests at the end)."""
    aiokafka = pytest.importorskip("aiokafka")

    async def send_and_read() -> bytes:
        await _send_once(kafka_broker.bootstrap_servers, "made-on-first-send", b"o-1")
        consumer = aiokafka.AIOKafkaConsumer("made-on-first-send",
                                             bootstrap_servers=kafka_broker.bootstrap_servers,
                                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await consumer.start()
        try:
            return bytes((await asyncio.wait_for(consumer.getone(), 10)).value)
        finally:
            await consumer.stop()

    started = time.monotonic()
    assert asyncio.run(send_and_read()) == b"o-1"
    assert time.monotonic() - started < 10
    assert kafka_clock.time() == 0  # nothing moved the broker's clock


# -- asyncio clients on the clock's own loop, with autojump -------------------------------------

AUTOJUMP_S = 0.01  # real seconds of idleness before the clock jumps: the loop's clients are all on it
HANG_GUARD_S = 30.0  # real seconds: without autojump the scenario waits for an advance for good


def _on_autojump_clock(scenario: Callable[[Broker], Awaitable[T]], config: dict[str, Any] | None = None,
                       ) -> tuple[T, VirtualClock]:
    """``scenario(broker)`` on an autojump clock's loop, the broker on that loop too; fails (not
    hangs) when the scenario has not ended after HANG_GUARD_S real seconds."""
    clock = VirtualClock(autojump_threshold=AUTOJUMP_S)

    async def main() -> T:
        async with Broker(config or {}, clock=clock) as broker:
            task = asyncio.ensure_future(scenario(broker))
            done, _ = await wait_real([task], HANG_GUARD_S)
            if not done:
                task.cancel()
                pytest.fail(f"the scenario did not end within {HANG_GUARD_S:g} real seconds "
                            f"(virtual clock at {clock.time():g})")
            return task.result()

    return clock.run(main()), clock


def test_aiokafka_on_the_clocks_loop_produces_to_a_new_topic_and_consumes_in_a_group() -> None:
    """The first send to a topic it auto-creates is answered LEADER_NOT_AVAILABLE and retried
    after retry_backoff_ms, a virtual timer on this loop: the clock jumps to it, as it does to
    the group's join and the consumer's fetch waits, with no advance() anywhere."""
    aiokafka = pytest.importorskip("aiokafka")

    async def scenario(broker: Broker) -> tuple[bytes, int | None]:
        await _send_once(broker.bootstrap_servers, "made-on-first-send", b"o-1")
        consumer = aiokafka.AIOKafkaConsumer("made-on-first-send", bootstrap_servers=broker.bootstrap_servers,
                                             group_id="readers", auto_offset_reset="earliest",
                                             enable_auto_commit=False)
        await consumer.start()
        try:
            record = await consumer.getone()
            await consumer.commit()
            partition = aiokafka.TopicPartition("made-on-first-send", record.partition)
            return bytes(record.value), await consumer.committed(partition)
        finally:
            await consumer.stop()

    started = time.monotonic()
    (value, committed), clock = _on_autojump_clock(scenario)
    assert (value, committed) == (b"o-1", 1)
    assert clock.time() > 0  # the clock moved by itself: the retry backoff at least
    assert time.monotonic() - started < 20


def test_a_transaction_left_open_is_aborted_by_autojump_while_no_client_talks() -> None:
    """An aiokafka transactional producer on the clock's loop sends in a transaction and goes
    quiet; the test only watches (broker.wait_for polls in real time). The loop is idle, so the
    clock jumps from timer to timer to transaction.timeout.ms (60 s) and the coordinator's check."""
    aiokafka = pytest.importorskip("aiokafka")

    async def scenario(broker: Broker) -> tuple[list[Any], float]:
        await broker.seed_async({"orders": {"partitions": 1}})
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                             transactional_id="stuck", transaction_timeout_ms=60_000)
        await producer.start()
        try:
            await producer.begin_transaction()
            await producer.send_and_wait("orders", b"never committed", partition=0)
            sent_at = asyncio.get_running_loop().time()
            markers = await broker.wait_for(lambda: [r for r in broker.records("orders") if r.is_control],
                                            timeout=HANG_GUARD_S - 5, what="the abort marker")
            return markers, sent_at
        finally:
            await producer.stop()

    started = time.monotonic()
    (markers, sent_at), clock = _on_autojump_clock(scenario)
    assert len(markers) == 1 and markers[0].is_transactional
    assert clock.time() >= sent_at + 60  # aborted on the coordinator's clock, past the timeout
    assert time.monotonic() - started < 20


def test_kafka_clock_jumps_by_itself_once_the_test_turns_autojump_on(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    """The fixture's path: a client in the test's thread does its part with the clock standing
    still, then, with it quiet, the test sets ``kafka_clock.autojump_threshold`` and the broker's
    timers fire with no advance()."""
    broker, _stuck = _abandoned_transaction(kafka_broker_factory)
    assert kafka_clock.time() == 0.0
    started = time.monotonic()
    kafka_clock.autojump_threshold = 0.05
    markers = wait_until(lambda: [r for r in broker.records("orders") if r.is_control], timeout=20,
                         what="the abort marker")
    assert len(markers) == 1 and kafka_clock.time() >= 60
    assert time.monotonic() - started < 15
