"""An embedded broker with Kafka's ACL authorizer, an admin that grants, and a producer that meets it.

    python examples/acls.py            # prints what each step saw, as JSON

The listener is SASL_PLAINTEXT/PLAIN (users admin and alice); ``authorizer.class.name=acl`` turns
the ACL authorizer on and ``super.users=User:admin`` lets admin do anything. alice's first produce
gets TOPIC_AUTHORIZATION_FAILED; admin grants her WRITE on the topics starting with ``orders.``
(a PREFIXED ACL, confluent-kafka's ``create_acls``) and her next produce is delivered; admin then
lists the ACLs with ``describe_acls`` (see docs/acls.md).
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafkapy import Broker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
CONFIG = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
          "authorizer.class.name": "acl", "super.users": "User:admin"}
TOPIC = "orders.eu"


def client(broker: Broker, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret", **extra}


def produce_as_alice(broker: Broker) -> str:
    """The delivery report of one record: NONE, or the error's name."""
    reports: list[Any] = []
    producer = Producer(client(broker, "alice", **{"message.timeout.ms": 5000}))
    producer.produce(TOPIC, b"an order", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(10)
    return "NONE" if reports and reports[0] is None else str(reports[0].name() if reports else "no report")


def main() -> None:
    with Broker(CONFIG) as broker:
        admin = AdminClient(client(broker, "admin"))
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
        before = produce_as_alice(broker)
        grant = AclBinding(ResourceType.TOPIC, "orders.", ResourcePatternType.PREFIXED, "User:alice", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
        admin.create_acls([grant])[grant].result(10)
        after = produce_as_alice(broker)
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        listed = admin.describe_acls(everything).result(10)
    print(json.dumps({"alice_before": before, "alice_after": after,
                      "acls": [f"{b.restype.name} {b.name} {b.resource_pattern_type.name} {b.principal} "
                               f"{b.operation.name} {b.permission_type.name}" for b in listed]}, indent=2))


if __name__ == "__main__":
    main()
