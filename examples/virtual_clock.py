"""An abandoned transaction aborted by the broker a minute later, in well under a real second.

    python examples/virtual_clock.py      # prints what the log holds before and after, as JSON

A transactional confluent-kafka producer writes a record and goes quiet without committing. On a
``VirtualClock`` the broker's transaction coordinator sees no time pass until the clock is
advanced; ``clock.advance(70)`` passes transaction.timeout.ms (60 s) and the coordinator's next
check (every 10 s), so it aborts the transaction and writes the ABORT marker (docs/testing.md,
"Virtual clock").
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer

from kafkapy import Broker, VirtualClock


def main() -> None:
    clock = VirtualClock()
    with Broker({"transaction.state.log.num.partitions": 1}, clock=clock) as broker:
        broker.seed({"orders": {"partitions": 1}})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "quiet",
                             "transaction.timeout.ms": 60_000,
                             # wakes librdkafka every 100 ms, so its first InitProducerId is not
                             # half a second late (docs/testing.md, "Keeping tests fast")
                             "topic.metadata.refresh.interval.ms": 100})
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce("orders", value=b"never committed", partition=0)
        producer.flush(10)
        before = [r.is_control for r in broker.records("orders")]
        started = time.monotonic()
        clock.advance(70)
        print(json.dumps({
            "control_records_before": sum(before),
            "control_records_after": sum(r.is_control for r in broker.records("orders")),
            "virtual_seconds": clock.time(),
            "real_seconds_under_1": time.monotonic() - started < 1,
        }, indent=2))


if __name__ == "__main__":
    main()
