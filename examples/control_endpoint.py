"""Driving a broker over HTTP, as a test written in Java or Go would: kafkapy's control endpoint.

    python examples/control_endpoint.py     # prints what the endpoint answered, as JSON

A broker starts with its control endpoint on a free loopback port. Over HTTP only (urllib), the
script seeds a topic, adds a fault rule that fails the next Produce with POLICY_VIOLATION, and
reads the records back; a confluent-kafka producer meets the fault between (docs/control.md).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from confluent_kafka import KafkaException, Producer

from kafkapy import Broker


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def main() -> None:
    with Broker(control="127.0.0.1:0") as broker:
        assert broker.control is not None
        base = broker.control.url
        seeded = call(base, "POST", "/seed", {"orders": {"partitions": 1, "records": [{"value": "a"}]}})
        fault = call(base, "POST", "/faults", {"api": "Produce", "times": 1,
                                               "action": {"type": "error", "error": "POLICY_VIOLATION"}})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
        outcomes: list[str] = []
        for value in (b"refused", b"b"):
            producer.produce("orders", value=value, partition=0,
                             on_delivery=lambda err, msg: outcomes.append(err.name() if err else "delivered"))
            producer.flush(30)
        del producer  # gone before the broker, so it logs no lost connection
        fired = call(base, "GET", f"/faults/{fault['id']}")["fired"]
        stored = [r["value"] for r in call(base, "GET", "/topics/orders/records")["records"]]
        print(json.dumps({"seeded": seeded, "fault_fired": fired, "deliveries": outcomes, "stored": stored},
                         indent=2))


if __name__ == "__main__":
    try:
        main()
    except KafkaException as exc:
        raise SystemExit(f"control_endpoint: {exc}") from None
