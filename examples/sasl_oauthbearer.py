"""An embedded broker whose listener requires SASL/OAUTHBEARER with unsecured JWTs (Kafka's default
validation), confluent-kafka clients that make their own tokens, and re-authentication (KIP-368).

    python examples/sasl_oauthbearer.py      # prints what each client saw, as JSON

The listener's JAAS entry is Kafka's OAuthBearerLoginModule; its ``unsecuredValidatorRequiredScope``
option makes the broker refuse tokens without the ``kafka`` scope. librdkafka makes an unsecured
JWT itself (``enable.sasl.oauthbearer.unsecure.jwt``, ``sasl.oauthbearer.config``). alice's token
has the scope: she produces for a few seconds while ``connections.max.reauth.ms`` (1.5 s) makes her
connection re-authenticate, and consumes what she produced. mallory's token lacks the scope: she
gets Kafka's error challenge as her authentication error (see docs/security.md).
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from kafkapy import Broker

JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="kafka";')
CONFIG = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
          "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
          "connections.max.reauth.ms": 1500}
PRODUCING_S = 4


def client(broker: Broker, principal: str, scope: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} scope={scope}", **extra}


def authentications(broker: Broker) -> list[int]:
    """How many times each open SASL connection has authenticated (the first time included)."""
    return sorted(c.authentications for c in broker.connections() if c.sasl_mechanism is not None)


def main() -> None:
    with Broker(CONFIG) as broker:
        producer = Producer(client(broker, "alice", "kafka"))
        produced = 0
        deadline = time.monotonic() + PRODUCING_S
        while time.monotonic() < deadline:
            producer.produce("greetings", f"hello #{produced}".encode())
            produced += 1
            producer.poll(0)
            time.sleep(0.1)
        unsent = producer.flush(10)
        sessions = authentications(broker)
        consumer = Consumer(client(broker, "alice", "kafka", **{"group.id": "example",
                                                               "auto.offset.reset": "earliest"}))
        consumer.subscribe(["greetings"])
        consumed = 0
        deadline = time.monotonic() + 20
        while consumed < produced and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed += 1
        consumer.close()
        errors: list[KafkaError] = []
        refused = Producer(client(broker, "mallory", "read", error_cb=errors.append,
                                  **{"reconnect.backoff.ms": 1000}))
        refused.produce("greetings", b"let me in")
        refused.flush(2)
    authentication = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    print(json.dumps({"alice": {"produced": produced, "unsent": unsent, "consumed": consumed,
                                "authentications_per_connection": sessions},
                      "mallory": {"authentication_error": authentication[0] if authentication else None}},
                     indent=2))


if __name__ == "__main__":
    main()
