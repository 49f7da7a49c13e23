"""A producer that retries through broker errors, proven against kafkapy's fault injection.

    python examples/fault_injection.py      # prints what the broker saw and kept, as JSON

The broker answers the first two Produce requests with NOT_LEADER_OR_FOLLOWER, as a Kafka broker
does while leadership moves. An idempotent confluent-kafka producer retries, and the log holds
every record exactly once: read back with ``broker.records``, the requests seen with
``broker.history`` (docs/testing.md).
"""

from __future__ import annotations

import json

from confluent_kafka import Producer

from kafkapy import Broker
from kafkapy.faults import ApiKey, ErrorAnswer, ErrorCode, FaultRule


def main() -> None:
    with Broker(history=True) as broker:
        not_leader = FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE, times=2)
        with broker.faults.injected(not_leader) as fault:
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                                 "retry.backoff.ms": 10})
            for i in range(5):
                producer.produce("orders", value=f"order-{i}".encode(), partition=0)
            left = producer.flush(30)
        produce_answers = [ErrorCode(e.error_code).name if e.error_code is not None else "no answer"
                           for e in broker.history() if e.api_key == ApiKey.PRODUCE]
        print(json.dumps({
            "undelivered": left,
            "fault_fired": fault.fired,
            "produce_answers": produce_answers,
            "stored": [(r.offset, r.value.decode() if r.value else None, r.sequence)
                       for r in broker.records("orders")],
        }, indent=2))


if __name__ == "__main__":
    main()
