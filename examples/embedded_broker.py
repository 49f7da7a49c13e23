"""Start an in-process kafkapy broker and describe it with kafka-python's admin client.

    python examples/embedded_broker.py            # prints the cluster description as JSON

The broker runs on a background thread on an ephemeral 127.0.0.1 port and stops
when the ``with`` block ends. ``advertise.private.api.keys=false`` keeps the
private BrokerMetadata key (1010) out of ApiVersions, so kafka-python's
``api_versions()`` works too (see docs/broker.md).
"""

from __future__ import annotations

import json

from kafka.admin import KafkaAdminClient

from kafkapy import Broker


def main() -> None:
    config = {"broker.id": 1, "broker.rack": "rack-a", "advertise.private.api.keys": "false"}
    with Broker(config) as broker:
        print(f"broker {broker.broker_id} listening on {broker.listeners}")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="embedded-example",
                                 request_timeout_ms=10_000, bootstrap_timeout_ms=10_000)
        try:
            cluster = admin.describe_cluster()
            apis = {key.name: list(versions) for key, versions in admin.api_versions().items()}
        finally:
            admin.close()
    print(json.dumps({"cluster": cluster, "api_versions": apis}, indent=2, default=str))


if __name__ == "__main__":
    main()
