"""Record a broker's traffic as a pcap file, then decode it as a traffic analyst would.

    python examples/capture_and_decode.py            # prints one JSON line per exchange, then a summary

The broker's CaptureObserver writes every frame it sees to a pcap file (Wireshark and tshark open
it too); ``kafkapy.capture.rows.decode_capture`` turns the file back into one row per
request/response pair, with both bodies decoded as JSON and the records of Produce and Fetch
decoded record by record. The same rows come from ``kafkapy decode capture.pcap`` and, on a
cluster, from ``kafkapy spark-decode`` (docs/capture.md).
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkapy import Broker
from kafkapy.capture.rows import decode_capture

TOPIC = "payments"


def exercise(bootstrap: str) -> None:
    """What an application does: produce three keyed records and read them back."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(3):
        producer.produce(TOPIC, key=f"customer-{n}".encode(), value=f"paid {10 * (n + 1)}".encode())
    if producer.flush(10):
        raise SystemExit("the producer could not deliver its records")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "capture-example",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read = 0
        while read < 3:
            message = consumer.poll(10)
            if message is None:
                raise SystemExit("the consumer read nothing for 10 s")
            if message.error() is None:
                read += 1
    finally:
        consumer.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        pcap = Path(scratch) / "broker.pcap"
        config = {"observer.class.names": "kafkapy.observers.CaptureObserver", "capture.path": str(pcap),
                  "auto.create.topics.enable": "true", "num.partitions": "1"}
        with Broker(config) as broker:
            port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
            exercise(broker.bootstrap_servers)
        # The broker has stopped, so the capture is complete (flows closed with a FIN).
        rows = list(decode_capture(pcap, kafka_ports=[port]))

    for row in rows:
        print(json.dumps({key: row[key] for key in ("api_name", "api_version", "status", "latency_ms")}))
    produced = [  # keys and values are base64 in the rows' JSON, as every byte string is
        [base64.b64decode(record[part]).decode() for part in ("key", "value")]
        for row in rows if row["api_name"] == "Produce" and row["request"]
        for topic in json.loads(row["request"])["topic_data"]
        for partition in topic["partition_data"]
        for record in partition["records"]
    ]
    summary = {
        "exchanges": len(rows),
        "by_api": dict(sorted(Counter(row["api_name"] for row in rows).items())),
        "statuses": dict(Counter(row["status"] for row in rows)),
        "produced": produced,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
