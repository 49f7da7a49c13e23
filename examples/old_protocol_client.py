"""An application pinned to Kafka 0.10's protocol, tested against kafkapy as against Kafka 3.x.

    python examples/old_protocol_client.py      # prints what it read and which versions it spoke

``KafkaProducer(api_version=(0, 10))`` is a line many older applications carry: the client skips
ApiVersions and speaks Produce v2 and Fetch v2, whose magic-1 messages the broker converts to
record batches and back, as Kafka 2.8-3.9 do (docs/dataplane.md, "Old clients"). Kafka 4.0 no
longer serves them; ``kafka.version=4.0`` makes kafkapy refuse them the same way.
"""

from __future__ import annotations

import json
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkapy import Broker

OLD = (0, 10)


def main() -> None:
    with Broker(history=True) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=OLD,
                                 compression_type="gzip")
        for i in range(3):
            producer.send("legacy", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                          timestamp_ms=1_700_000_000_000 + i).get(timeout=30)
        producer.close()

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, api_version=OLD,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        consumer.assign([TopicPartition("legacy", 0)])
        read: list[list[object]] = []
        deadline = time.monotonic() + 30
        while len(read) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                read.extend([r.offset, (r.key or b"").decode(), (r.value or b"").decode(), r.timestamp]
                            for r in records)
        consumer.close()
        spoken = sorted({f"{h.api_name} v{h.api_version}" for h in broker.history()
                         if h.api_name in ("Produce", "Fetch")})
        print(json.dumps({"read": read, "versions": spoken}))


if __name__ == "__main__":
    main()
