"""What a connection its IP's rate throttles leaves behind, on virtual time: as in Kafka's
ConnectionQuotas (recordIpConnectionMaybeThrottle, updateListenerMetrics), it is taken out of
the broker-wide and listener rates it was recorded in, and while it is held before its close it
takes no connection slot, so a storm from one IP neither slows nor blocks other clients' accepts.
"""

from __future__ import annotations

import asyncio

from kafkapy import VirtualClock
from kafkapy.quotas.connections import ConnectionQuotas
from kafkapy.quotas.metrics import MetricsRegistry
from kafkapy.server.config import BrokerConfig

LISTENER = "PLAINTEXT"
STORMER, OTHER = "10.0.0.1", "10.0.0.2"


def _quotas(loop: asyncio.AbstractEventLoop, **extra: object) -> ConnectionQuotas:
    settings = dict(BrokerConfig.build({"quota.window.num": 2, "quota.window.size.seconds": 1,
                                        **extra}).values)
    quotas = ConnectionQuotas(settings, [LISTENER], LISTENER, MetricsRegistry(loop.time), clock=loop.time)
    quotas.set_ip_rate_quotas({STORMER: 1.0}, None)
    return quotas


async def _connect(quotas: ConnectionQuotas, address: str) -> bool:
    """One accepted socket through the gate, as the broker's accept loop drives it."""
    await quotas.acceptor_wait(LISTENER)
    admitted = await quotas.admit(LISTENER, address)
    if not admitted:
        quotas.released(LISTENER, address, False)
    return admitted


def test_an_ip_throttled_connection_is_taken_out_of_the_broker_and_listener_rates() -> None:
    clock = VirtualClock()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        quotas = _quotas(loop)
        listener = quotas.listeners[LISTENER]
        assert await _connect(quotas, STORMER)
        held = [asyncio.ensure_future(_connect(quotas, STORMER)) for _ in range(5)]
        await asyncio.sleep(0)  # each recorded, then throttled by its IP's rate
        assert listener.throttled.count == 5
        now = loop.time()
        # Only the one accepted connection is left in the rates (padded window: 1 s).
        assert quotas.broker_rate.measure(now) == 1.0
        assert listener.rate.measure(now) == 1.0
        await clock.advance_async(1.5)
        assert not any(await asyncio.gather(*held))
        assert listener.dropped.count == 5

    clock.run(main())


def test_a_held_throttled_connection_takes_no_connection_slot() -> None:
    clock = VirtualClock()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        quotas = _quotas(loop, **{"max.connections": 2})
        assert await _connect(quotas, STORMER)
        held = asyncio.ensure_future(_connect(quotas, STORMER))
        await asyncio.sleep(0)
        assert quotas.listeners[LISTENER].throttled.count == 1
        assert quotas.total == 1
        # Another client gets the free slot at once, while the throttled socket waits for its close.
        other = asyncio.ensure_future(_connect(quotas, OTHER))
        await asyncio.sleep(0)
        assert other.done() and other.result()
        assert quotas.total == 2
        await clock.advance_async(1.5)
        assert held.done() and not held.result()
        assert quotas.total == 2 and quotas.listeners[LISTENER].count == 2  # released exactly once

    clock.run(main())


def test_a_held_connection_cancelled_by_a_stop_is_released_once() -> None:
    clock = VirtualClock()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        quotas = _quotas(loop)
        assert await _connect(quotas, STORMER)
        await quotas.acceptor_wait(LISTENER)
        admission = asyncio.ensure_future(quotas.admit(LISTENER, STORMER))
        await asyncio.sleep(0)
        assert quotas.total == 1
        admission.cancel()
        await asyncio.gather(admission, return_exceptions=True)
        quotas.released(LISTENER, STORMER, False)  # what the broker does when the wait is cancelled
        assert quotas.total == 1 and quotas.listeners[LISTENER].count == 1

    clock.run(main())
