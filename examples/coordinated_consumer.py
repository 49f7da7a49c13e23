"""Seed 001's broker-side consumer coordinator: two consumers share a topic, then one leaves.

    python examples/coordinated_consumer.py       # prints each step's assignment as JSON lines

One in-process broker runs with ``kafkapy.modules=coordination`` and is elected coordinator. Two
CoordinatedConsumers register in group "demo"; the coordinator splits the topic's partitions with
the old consumer's range assignor (StopFetcher, then StartFetcher to both). When the second
consumer closes its connection, the first gets every partition back. See docs/coordination.md.
"""

from __future__ import annotations

import asyncio
import json

from kafkapy import Broker
from kafkapy.coordination.client import CoordinatedConsumer


async def wait_for(condition: object, timeout: float = 10.0) -> None:
    assert callable(condition)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise SystemExit("timed out")
        await asyncio.sleep(0.02)


def owned(consumer: CoordinatedConsumer) -> list[int]:
    return sorted(p.partition for p in consumer.assignment)


def report(step: str, *consumers: CoordinatedConsumer) -> None:
    print(json.dumps({"step": step, "assignment": {c.consumer_id: owned(c) for c in consumers}}))


async def main() -> None:
    config = {"broker.id": 1, "kafkapy.modules": "coordination", "coordinator.min.session.timeout.ms": 500}
    broker = await Broker(config).start()
    assert broker.runtime is not None
    try:
        listener = broker.runtime.listeners[0]
        await asyncio.to_thread(broker.runtime.store.create_topic, "orders", {p: (1,) for p in range(4)})
        bootstrap = [(listener.host, listener.port)]
        first = CoordinatedConsumer(bootstrap, "demo", "alpha", {"orders": 1}, session_timeout_ms=1500)
        second = CoordinatedConsumer(bootstrap, "demo", "beta", {"orders": 1}, session_timeout_ms=1500)
        first.start()
        await wait_for(lambda: owned(first) == [0, 1, 2, 3])
        report("alpha alone", first)
        second.start()
        await wait_for(lambda: owned(first) == [0, 1] and owned(second) == [2, 3])
        report("alpha and beta", first, second)
        await second.close()
        await wait_for(lambda: owned(first) == [0, 1, 2, 3])
        report("beta left", first)
        await first.close()
    finally:
        await broker.stop()


if __name__ == "__main__":
    asyncio.run(main())
