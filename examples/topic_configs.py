"""Create a topic with configs on an in-process broker, change one, and read what the log will obey.

    python examples/topic_configs.py              # prints the described configs and the LogConfig as JSON

The broker's ``log.retention.hours=48`` is the default of every topic's ``retention.ms``; the
topic's own ``cleanup.policy`` and ``max.message.bytes`` override theirs. ``log_config`` is what
the data plane reads (the ``topic-configs`` capability, docs/topics.md).
"""

from __future__ import annotations

import json

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from kafkapy import Broker
from kafkapy.configs import ConfigsModule


def main() -> dict[str, object]:
    with Broker({"broker.id": 1, "log.retention.hours": 48}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        created = admin.create_topics([NewTopic("orders", 1, 1, config={"cleanup.policy": "compact"})])
        created["orders"].result(timeout=10)
        change = ConfigEntry("max.message.bytes", "65536", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[change])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=10)
        described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")])
        entries = next(iter(described.values())).result(timeout=10)
        assert broker.runtime is not None
        configs = next(m for m in broker.runtime.modules if isinstance(m, ConfigsModule))
        log_config = configs.log_config("orders")
    return {
        "described": {name: [entry.value, ConfigSource(entry.source).name] for name, entry in entries.items()
                      if name in ("cleanup.policy", "max.message.bytes", "retention.ms")},
        "log_config": {"compacts": log_config.compacts, "max_message_bytes": log_config.max_message_bytes,
                       "retention_ms": log_config.retention_ms},
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2, sort_keys=True))
