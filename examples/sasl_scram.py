"""SCRAM users made with AlterUserScramCredentials, then logging in with SCRAM-SHA-256 and -512.

    python examples/sasl_scram.py            # prints what each step saw, as JSON

The broker has a PLAINTEXT listener for administration and a SASL_PLAINTEXT one that accepts
SCRAM-SHA-256 and SCRAM-SHA-512 (``sasl.enabled.mechanisms``). confluent-kafka's AdminClient
creates the credentials (the client salts the password; the broker keeps Kafka's salt, stored
key, server key and iteration count in its metadata store, see docs/security.md); producers
then log in with each mechanism, and a wrong password is refused.
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kafkapy import Broker

CONFIG = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
          "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


def produce(address: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                         "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    producer.produce("scram-example", f"from {user}".encode())
    unsent = producer.flush(5 if password != "wrong" else 2)
    refused = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    return {"delivered": unsent == 0, "authentication_error": refused[0] if refused else None}


def main() -> None:
    with Broker(CONFIG) as broker:
        admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
        sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        upserts = [UserScramCredentialUpsertion("alice", sha256, b"a-pw"),
                   UserScramCredentialUpsertion("bob", sha512, b"b-pw")]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(10)
        described = admin.describe_user_scram_credentials().result(10)
        sasl = broker.listeners["SASL_PLAINTEXT"]
        report = {
            "credentials": {user: [[i.mechanism.name, i.iterations] for i in d.scram_credential_infos]
                            for user, d in sorted(described.items())},
            "alice SCRAM-SHA-256": produce(sasl, "SCRAM-SHA-256", "alice", "a-pw"),
            "bob SCRAM-SHA-512": produce(sasl, "SCRAM-SHA-512", "bob", "b-pw"),
            "bob wrong password": produce(sasl, "SCRAM-SHA-512", "bob", "wrong"),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
