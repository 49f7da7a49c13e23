"""The idle sweep: a connection closes at connections.max.idle.ms, to the instant, and the
sweep sleeps until the next deadline instead of ticking, so a virtual clock can jump days."""

from __future__ import annotations

import asyncio

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.server.clock import sleep_real

IDLE_MS = 5000


def test_an_idle_connection_closes_at_its_deadline_and_not_before() -> None:
    clock = VirtualClock()

    async def main() -> None:
        async with Broker({"connections.max.idle.ms": IDLE_MS}, clock=clock) as broker:
            host, port = broker.bootstrap_servers.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            await broker.wait_for(lambda: broker.runtime is not None and broker.runtime.connections,
                                  timeout=5, what="the connection accepted")
            await clock.advance_async(IDLE_MS / 1000 - 0.001)
            assert not reader.at_eof()
            await sleep_real(0.05)  # a close, had there been one, would have arrived by now
            assert not reader.at_eof()
            await clock.advance_async(0.001)
            assert await asyncio.wait_for(reader.read(1), 5) == b""
            writer.close()

    clock.run(main())


def test_with_no_connection_the_sweep_sleeps_a_whole_idle_timeout() -> None:
    clock = VirtualClock()
    with Broker({"connections.max.idle.ms": IDLE_MS}, clock=clock) as broker:
        clock.advance(86_400)  # a day
        runtime = broker.runtime
        assert runtime is not None and runtime._idle_sweep is not None
        # The next sweep lies within one idle timeout, never sooner than a tick would be.
        due_in = runtime._idle_sweep.when() - clock.time()
        assert 0 < due_in <= IDLE_MS / 1000
        assert due_in > 1.0  # the old sweep ticked every second at most
