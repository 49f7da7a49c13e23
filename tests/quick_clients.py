"""Client settings (and one warm-up) for tests whose point is not the clients' default timing
(tests/ is on sys.path through its conftest).

A real client's defaults are tuned for a broker across a network, and a test that leaves them
waits on them: issue 18 asks that its tests run in under 30 s because nothing waits on wall-clock
time (docs/testing.md, "Keeping tests fast"). Each setting here names the wait it removes; a test
whose point is one of these timers sets that timer itself instead.
"""

from __future__ import annotations

from typing import Any

from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

__all__ = ["HEARTBEAT_MS", "KAFKA_PYTHON_CONSUMER", "KCAT_CONSUMER", "RDKAFKA_CLIENT", "RDKAFKA_CONSUMER",
           "warm_transaction_coordinator"]

TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key_type for a transactional id (0: a group)

# A classic rebalance completes when every member has rejoined, and a member hears of the
# rebalance in its next heartbeat's answer: the heartbeat interval is most of each step's wall time.
HEARTBEAT_MS = 100

# librdkafka's main thread runs its state machines (the consumer group's, the idempotent and
# transactional producer's PID acquisition) when an op or a timer wakes it, else every 500 ms to
# 1 s: a producer waits that long for its first InitProducerId, a cooperative rebalance's second
# round and each rejoin that long to start. A 100 ms metadata refresh timer (default 300 000)
# wakes it. Not for a consumer of a broker on a frozen virtual clock: a Metadata request sent
# behind its parked Fetch long poll waits with it, and a rejoin waits for that Metadata.
RDKAFKA_CLIENT: dict[str, Any] = {"topic.metadata.refresh.interval.ms": 100}

RDKAFKA_CONSUMER: dict[str, Any] = {
    **RDKAFKA_CLIENT,
    # A connection answers in order (as Kafka's does), so a ListOffsets or OffsetFetch sent behind
    # a Fetch long-poll on an idle partition waits out that Fetch: 100 ms, not the default 500.
    "fetch.wait.max.ms": 100,
}

# kcat -C -e exits once each partition's Fetch has come back at its end, which an empty read
# does only after fetch.wait.max.ms: 100 ms, not the default 500.
KCAT_CONSUMER = ["-X", f"fetch.wait.max.ms={RDKAFKA_CONSUMER['fetch.wait.max.ms']}"]

KAFKA_PYTHON_CONSUMER: dict[str, Any] = {
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
