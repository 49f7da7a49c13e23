"""An embedded broker whose listener requires SASL/PLAIN, and confluent-kafka clients that log in.

    python examples/sasl_plain.py            # prints what each client saw, as JSON

The listener is SASL_PLAINTEXT with Kafka's own config keys: ``sasl.enabled.mechanisms`` and a
PlainLoginModule JAAS entry whose ``user_<name>="<password>"`` options are the users. alice
produces and consumes a record; mallory, with a wrong password, gets librdkafka's authentication
error carrying the broker's message (see docs/security.md).
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from kafkapy import Broker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
CONFIG = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}


def client(broker: Broker, user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}


def main() -> None:
    with Broker(CONFIG) as broker:
        producer = Producer(client(broker, "alice", "alice-secret"))
        producer.produce("greetings", b"hello, authenticated world")
        unsent = producer.flush(10)
        consumer = Consumer(client(broker, "alice", "alice-secret", **{"group.id": "example",
                                                                      "auto.offset.reset": "earliest"}))
        consumer.subscribe(["greetings"])
        consumed = None
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed = message.value().decode()
                break
        consumer.close()
        errors: list[KafkaError] = []
        refused = Producer(client(broker, "mallory", "guess", error_cb=errors.append,
                                  **{"reconnect.backoff.ms": 1000}))
        refused.produce("greetings", b"let me in")
        refused.flush(2)
    authentication = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    print(json.dumps({"alice": {"unsent": unsent, "consumed": consumed},
                      "mallory": {"authentication_error": authentication[0] if authentication else None}},
                     indent=2))


if __name__ == "__main__":
    main()
