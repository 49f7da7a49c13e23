"""The idle sweep: a connection closes at connections.max.idle.ms, to the instant, and the
sweep sleeps until the next deadline instead of ticking, so a virtual clock can jump days."""

from __future__ import annotations

import asyncio
import socket

from server_wire import frame, split_address

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.faults import Delay, FaultRule
from kafkapy.protocol import encode_request
from kafkapy.protocol.api_keys import ApiKey
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


def _closed(sock: socket.socket, wait_s: float) -> bool:
    """Whether the broker closed ``sock`` (reading what it sent until then)."""
    sock.settimeout(wait_s)
    try:
        while chunk := sock.recv(65536):
            del chunk
    except TimeoutError:
        return False
    return True


def test_an_answer_that_waited_past_the_idle_timeout_starts_a_new_one() -> None:
    """Kafka's Selector counts the write of an answer as activity. A request answered only after
    connections.max.idle.ms (here a fault delay; a long-poll Fetch alike) leaves the client a whole
    idle timeout for its next request; it was closed at once, idle since the request came in."""
    clock = VirtualClock()
    with Broker({"connections.max.idle.ms": IDLE_MS}, clock=clock) as broker:
        broker.faults.add(FaultRule(Delay(2 * IDLE_MS / 1000), api=ApiKey.METADATA, times=1))
        with socket.create_connection(split_address(broker.bootstrap_servers)) as sock:
            sock.sendall(frame(encode_request(ApiKey.METADATA, 1, 7, "idle", {"topics": []})))
            runtime = broker.runtime
            assert runtime is not None
            broker.wait_for_sync(lambda: any(c.busy for c in runtime.connections),
                                 what="the Metadata request held by the delay")
            clock.advance(2 * IDLE_MS / 1000)  # answered now
            clock.advance(IDLE_MS / 1000 - 0.01)
            assert not _closed(sock, 0.2)
            clock.advance(0.01 + IDLE_MS / 8000)  # past the deadline, and the sweep has come round
            assert _closed(sock, 5)


def test_a_negative_idle_timeout_never_closes_an_idle_connection() -> None:
    """Kafka's Selector keeps no idle expiry when connections.max.idle.ms is negative."""
    clock = VirtualClock()

    async def main() -> None:
        async with Broker({"connections.max.idle.ms": -1}, clock=clock) as broker:
            host, port = broker.bootstrap_servers.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            await broker.wait_for(lambda: broker.runtime is not None and broker.runtime.connections,
                                  timeout=5, what="the connection accepted")
            await clock.advance_async(86_400)  # a day
            await sleep_real(0.05)  # a close, had there been one, would have arrived by now
            assert not reader.at_eof()
            writer.write(frame(encode_request(ApiKey.API_VERSIONS, 0, 1, "idle", {})))
            assert len(await asyncio.wait_for(reader.read(4), 5)) == 4  # still served
            writer.close()

    clock.run(main())
