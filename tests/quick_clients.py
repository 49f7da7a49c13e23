"""Client settings (and one warm-up) for tests whose point is not the clients' default timing
(tests/ is on sys.path through its conftest).

A real client's defaults are tuned for a broker across a network, and a test that leaves them
waits on them: issue 18 asks that its tests run in under 30 s because nothing waits on wall-clock
time (docs/testing.md, "Keeping tests fast"). Each setting here names the wait it removes; a test
whose point is one of these timers sets that timer itself instead.
"""

from __future__ import annotations

from typing import Any

import confluent_kafka
from kafka import KafkaConsumer

from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

__all__ = ["HEARTBEAT_MS", "KAFKA_PYTHON_CLIENT", "KAFKA_PYTHON_CONSUMER", "KCAT_CONSUMER", "RDKAFKA_CLIENT",
           "RDKAFKA_CONSUMER", "RDKAFKA_WAKE", "commit_offset", "prompt_producer_id", "send_group_offsets",
           "warm_transaction_coordinator"]

TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key_type for a transactional id (0: a group)

# A classic rebalance completes when every member has rejoined, and a member hears of the
# rebalance in its next heartbeat's answer: the heartbeat interval is most of each step's wall time
# (Kafka's default is 3 s). 50 ms: a heartbeat is a small request to a broker in this process.
HEARTBEAT_MS = 50

# librdkafka's main thread runs its state machines (the consumer group's, the idempotent and
# transactional producer's PID acquisition) when an op or a timer wakes it, else every 500 ms to
# 1 s: a producer waits that long for its first InitProducerId, a cooperative rebalance's second
# round and each rejoin that long to start. A 100 ms metadata refresh timer (default 300 000)
# wakes it. Not for a consumer of a broker on a frozen virtual clock: a Metadata request sent
# behind its parked Fetch long poll waits with it, and a rejoin waits for that Metadata.
RDKAFKA_CLIENT: dict[str, Any] = {"topic.metadata.refresh.interval.ms": 100}

# Any of librdkafka's own timers wakes its main thread, and its statistics timer sends nothing (the
# statistics go to a stats_cb, and no test sets one): one as often as a heartbeat is due (default
# 0, off) wakes it without a Metadata request. For a group member that RDKAFKA_CLIENT does not
# suit (a consumer on a frozen virtual clock): its heartbeats then come every
# heartbeat.interval.ms, not 0.2-0.5 s apart.
RDKAFKA_WAKE: dict[str, Any] = {"statistics.interval.ms": HEARTBEAT_MS}

RDKAFKA_CONSUMER: dict[str, Any] = {
    **RDKAFKA_CLIENT,
    # A connection answers in order (as Kafka's does), so a ListOffsets or OffsetFetch sent behind
    # a Fetch long-poll on an idle partition waits out that Fetch: 100 ms, not the default 500.
    "fetch.wait.max.ms": 100,
}

# kcat -C -e exits once each partition's Fetch has come back at its end, which an empty read
# does only after fetch.wait.max.ms: 100 ms, not the default 500.
KCAT_CONSUMER = ["-X", f"fetch.wait.max.ms={RDKAFKA_CONSUMER['fetch.wait.max.ms']}"]

# kafka-python, like Kafka's Java client, refreshes metadata no sooner than retry_backoff_ms (100)
# after its last refresh, so a client's first use of a topic, right after its bootstrap Metadata,
# waits out most of 100 ms: each producer's first send, each consumer's first subscribe or assign.
# kafka-python 3.0.x builds its metadata without the client's retry_backoff_ms (always 100); its
# kafka_client hook is where it can be set, for metadata alone (produce retries keep theirs).
METADATA_BACKOFF_MS = 10
_KAFKA_PYTHON_NET_CLIENT: Any = KafkaConsumer.DEFAULT_CONFIG["kafka_client"]  # KafkaNetClient in 3.0.x


class _QuickMetadataClient(_KAFKA_PYTHON_NET_CLIENT):  # type: ignore[misc]
    """kafka-python's network client, its metadata refreshed METADATA_BACKOFF_MS apart at most."""

    def __init__(self, *args: Any, **configs: Any) -> None:
        super().__init__(*args, **configs)
        self.cluster.config["retry_backoff_ms"] = METADATA_BACKOFF_MS


KAFKA_PYTHON_CLIENT: dict[str, Any] = {"kafka_client": _QuickMetadataClient}

KAFKA_PYTHON_CONSUMER: dict[str, Any] = {
    **KAFKA_PYTHON_CLIENT,
    "heartbeat_interval_ms": HEARTBEAT_MS,
    # The same in-order wait as librdkafka's above (default 500).
    "fetch_max_wait_ms": 100,
}


def warm_transaction_coordinator(bootstrap_servers: str, timeout: float = 10.0) -> None:
    """Have the broker make ``__transaction_state`` now. Kafka (and kafkapy) make it on the first
    FindCoordinator that needs it and answer that one COORDINATOR_NOT_AVAILABLE; librdkafka asks
    again 500 ms later, on a fixed timer. For a test whose point is not that first use."""
    with SimpleClient(bootstrap_servers.split(",")[0]) as client:  # any broker of a cluster answers
        def found() -> bool:
            answer = client.request(ApiKey.FIND_COORDINATOR, 1,
                                    {"key": "warm-up", "key_type": TRANSACTION_KEY_TYPE})
            return bool(answer.error_code == ErrorCode.NONE)
        wait_until(found, timeout, what="the transaction coordinator")


def prompt_producer_id(producer: Any, topic: str, timeout: float = 10.0) -> None:
    """Have an idempotent librdkafka producer ask for its producer id now. It asks when a Metadata
    answer comes in while a broker is up, else on a fixed 500 ms timer; its first answer comes
    over the bootstrap connection, which it drops once it knows the brokers, so the first send
    waits out the timer. A second Metadata request goes to a broker it knows, and its answer
    starts the InitProducerId. For a producer that cannot take RDKAFKA_CLIENT's periodic refresh
    (its point is to learn of a moved leader only from a refusal)."""
    for _ in range(2):
        producer.list_topics(topic, timeout=timeout)


def commit_offset(bootstrap_servers: str, group: str, topic: str, offset: int, partition: int = 0) -> None:
    """``group``'s offset of ``topic``-``partition``, committed by a confluent-kafka consumer that
    never joins: a classic group with no member (Empty) and that offset."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group,
                                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, partition, offset)],
                        asynchronous=False)
    finally:
        consumer.close()


def send_group_offsets(producer: confluent_kafka.Producer, bootstrap_servers: str, group: str, topic: str,
                       offset: int, partition: int = 0, timeout: float = 30.0) -> None:
    """``group``'s offset of ``topic``-``partition`` into ``producer``'s open transaction
    (AddOffsetsToTxn, TxnOffsetCommit), with the group metadata of a confluent-kafka consumer of
    that group that never joins: what a consume-transform-produce round sends."""
    reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group})
    try:
        producer.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, partition, offset)],
                                             reader.consumer_group_metadata(), timeout)
    finally:
        reader.close()
