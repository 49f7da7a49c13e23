"""Read the metrics a real client pushes to the broker (KIP-714 client telemetry).

    python examples/client_telemetry.py      # prints the producer's pushed metrics, as JSON

The broker runs the telemetry module (``kafkapy.modules=telemetry``); a ``CLIENT_METRICS``
subscription asks clients whose id starts with ``billing-`` for their producer metrics every
200 ms. confluent-kafka (librdkafka) asks for its subscription on connecting, then pushes; the
test reads the pushes with ``broker.telemetry()`` (see docs/telemetry.md).
"""

from __future__ import annotations

import json

from confluent_kafka import Producer

from kafkapy import Broker


def main() -> None:
    with Broker({"kafkapy.modules": "telemetry"}) as broker:
        broker.set_client_metrics("billing", metrics=["org.apache.kafka.producer."], interval_ms=200,
                                  match=["client_id=billing-.*"])
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "billing-api"})
        for number in range(100):
            producer.produce("invoices", f"invoice {number}".encode())
        unsent = producer.flush(10)
        pushes = broker.wait_for_sync(lambda: broker.telemetry(client_id="billing-api"))
        latest = {point.name: point.value for point in pushes[-1].metrics}
    print(json.dumps({"unsent": unsent, "pushes": len(pushes), "compression": pushes[-1].compression,
                      "metrics": dict(sorted(latest.items()))}, indent=2))


if __name__ == "__main__":
    main()
