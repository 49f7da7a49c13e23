"""aiokafka on a virtual clock's own loop, the clock jumping by itself: no advance() anywhere.

    python examples/virtual_clock_autojump.py      # prints what was read and how far time went, as JSON

An asyncio client started on the clock's loop has its timers on virtual time too: its retry
after the first send to a topic it auto-creates (LEADER_NOT_AVAILABLE, then retry_backoff_ms)
would wait for an advance. With ``autojump_threshold`` the loop moves the clock to its next
timer whenever it has been idle that many real seconds (docs/testing.md, "Autojump").
"""

from __future__ import annotations

import json
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from kafkapy import Broker, VirtualClock

clock = VirtualClock(autojump_threshold=0.01)


async def produce_and_consume() -> dict[str, object]:
    async with Broker(clock=clock) as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        await producer.send_and_wait("orders", b"o-1")  # the topic is made by this first send
        await producer.stop()
        consumer = AIOKafkaConsumer("orders", bootstrap_servers=broker.bootstrap_servers, group_id="billing",
                                    auto_offset_reset="earliest")
        await consumer.start()
        record = await consumer.getone()
        await consumer.stop()
        return {"read": record.value.decode() if record.value else None, "clock_moved": clock.time() > 0}


def main() -> None:
    started = time.monotonic()
    result = clock.run(produce_and_consume())
    print(json.dumps({**result, "real_seconds_under_10": time.monotonic() - started < 10}, indent=2))


if __name__ == "__main__":
    main()
