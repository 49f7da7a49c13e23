"""Broker(clock=...): which loop it runs on, what stays real, and that its timestamps and fault
delays follow the clock."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kafkapy import VirtualClock
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.faults import Delay, FaultRule
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.quotas.module import QuotasModule
from kafkapy.server.broker import BrokerRuntime
from kafkapy.testing import BrokerFactory


def test_real_time_stays_the_default() -> None:
    with Broker() as broker:
        runtime = broker.runtime
        assert isinstance(runtime, BrokerRuntime)
        assert runtime.clock is time.monotonic and runtime.wall_clock is time.time


def test_brokers_on_one_clock_share_its_loop_thread_until_the_last_stops() -> None:
    clock = VirtualClock()
    with Broker(clock=clock) as first:
        with Broker(clock=clock) as second:
            assert first._thread is second._thread and first._thread is not None
            thread = first._thread
            assert first.runtime is not None and first.runtime.clock() == clock.time()
        assert thread.is_alive()  # the first broker still runs on it
        clock.advance(1)
        assert first.runtime is not None and first.runtime.clock() == 1.0
    thread.join(5)
    assert not thread.is_alive()


def test_a_cluster_on_a_frozen_clock_still_moves_its_leaders() -> None:
    """Settling after a broker goes down waits in real time, so the frozen clock holds nothing."""
    clock = VirtualClock()
    with Broker(brokers=3, clock=clock) as cluster:
        cluster.seed({"spread": {"partitions": 3}})
        cluster.stop_broker(0)
        cluster.start_broker(0)
        assert len(cluster.bootstrap_servers.split(",")) == 3
    assert clock.time() == 0.0


def test_start_off_the_clocks_loop_is_refused() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match="clock's loop"):
            await Broker(clock=VirtualClock()).start()

    asyncio.run(main())


def test_an_asyncio_test_runs_on_the_clock_and_advances_from_there() -> None:
    clock = VirtualClock()

    async def main() -> None:
        async with Broker({"connections.max.idle.ms": 5000}, clock=clock) as broker:
            host, port = broker.bootstrap_servers.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            await clock.advance_async(6)  # the idle sweep closes it
            assert await asyncio.wait_for(reader.read(1), 5) == b""
            writer.close()
            assert await broker.wait_for(lambda: clock.time(), timeout=1) == 6.0

    clock.run(main())


def test_seeded_records_carry_the_clocks_wall_time(kafka_clock: VirtualClock, kafka_broker: Broker) -> None:
    kafka_clock.advance(3600)
    kafka_broker.seed({"stamped": {"partitions": 1, "records": [{"value": "v"}]}})
    [record] = kafka_broker.records("stamped")
    assert record.timestamp == int(kafka_clock.wall() * 1000)
    assert record.timestamp >= int((time.time() + 3500) * 1000)  # an hour ahead of the real clock


def test_a_fault_delay_waits_for_the_clock(kafka_clock: VirtualClock,
                                           kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory()
    broker.faults.add(FaultRule(Delay(5.0), api=ApiKey.METADATA, times=1))
    answered = threading.Event()

    def ask() -> None:
        with SimpleClient(broker.bootstrap_servers) as client:
            client.request(ApiKey.METADATA, 1, {"topics": []})
        answered.set()

    asker = threading.Thread(target=ask)
    asker.start()
    broker.wait_for_sync(lambda: [e for e in broker.history() if e.api_key == ApiKey.METADATA],
                         what="the Metadata request")
    kafka_clock.advance(4.9)
    assert not answered.wait(0.2)
    kafka_clock.advance(0.1)
    assert answered.wait(5)
    asker.join(5)


def test_a_quota_throttle_mutes_the_connection_until_the_clock_passes_it(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"quota.window.num": 2})
    broker.seed({"metered": {"partitions": 1}})
    with SimpleClient(broker.bootstrap_servers, client_id="admin") as admin:
        answer = admin.request(ApiKey.ALTER_CLIENT_QUOTAS, 0, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": "metered-app"}],
            "ops": [{"key": "producer_byte_rate", "value": 1000.0, "remove": False}]}]})
        assert [entry["error_code"] for entry in answer["entries"]] == [ErrorCode.NONE]
    [quotas] = [m for m in broker._running().modules if isinstance(m, QuotasModule)]
    broker.wait_for_sync(lambda: quotas._client_quotas_installed, what="the client quota")
    answered = threading.Event()
    with SimpleClient(broker.bootstrap_servers, client_id="metered-app") as client:
        batch = build_record_batch([{"value": b"x" * 1000} for _ in range(20)])
        produced = client.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                                      "topic_data": [{"name": "metered", "partition_data": [
                                                          {"index": 0, "records": batch}]}]})
        throttle_ms = produced["throttle_time_ms"]
        assert throttle_ms > 1000  # 20 kB against 1 kB/s

        def ask() -> None:
            client.request(ApiKey.API_VERSIONS, 0, {})
            answered.set()

        asker = threading.Thread(target=ask)
        asker.start()
        assert not answered.wait(0.3)  # muted (KIP-219), and no real time ends the mute
        kafka_clock.advance(throttle_ms / 1000)
        assert answered.wait(5)
        asker.join(5)


def test_the_fixtures_cluster_runs_on_kafka_clock(kafka_clock: VirtualClock, kafka_cluster: Broker) -> None:
    kafka_clock.advance(42)
    clocks = [member.runtime.clock() for member in kafka_cluster.brokers if member.runtime is not None]
    assert clocks == [42.0, 42.0, 42.0]


def test_without_kafka_clock_the_fixtures_keep_real_time(kafka_broker: Broker) -> None:
    assert kafka_broker.clock is None
    assert kafka_broker.runtime is not None and kafka_broker.runtime.clock is time.monotonic


def test_an_autojump_clock_stands_still_while_the_broker_starts_and_seeds() -> None:
    """Start and seed wait in real time for the store's watch threads (the settle polls): work
    the loop cannot see, so it is held as work in progress and the clock does not jump through
    it (a single broker's seed used to run 645 virtual seconds of its timers with a threshold of 0)."""
    clock = VirtualClock(autojump_threshold=0)

    async def main() -> list[float]:
        times = []
        for brokers in (1, 3):
            async with Broker(brokers=brokers, clock=clock) as cluster:
                times.append(clock.time())
                await cluster.seed_async({"jobs": {"partitions": 6}})
                times.append(clock.time())
        return times

    assert clock.run(main()) == [0.0] * 4
