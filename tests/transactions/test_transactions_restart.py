"""A transaction left open when a broker with log.dirs stops is found at its restart and aborted.

The broker keeps its topics across the restart (its store in metadata.log.dir), so the coordinator
loads ``__transaction_state`` at start with no client asking, times the open transaction out and
writes its abort marker to the data topic, which is there: a read_committed consumer reads on.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkapy import Broker
from kafkapy.testing import wait_until

TIMEOUT_S = 20
TOPIC = "payments"


def test_an_open_transaction_is_found_and_aborted_after_a_restart(tmp_path: Path) -> None:
    settings = {"log.dirs": str(tmp_path), "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}
    with Broker(settings) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(TIMEOUT_S)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "payer",
                             "transaction.timeout.ms": 3000})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        for index in range(3):
            producer.produce(TOPIC, f"payment-{index}".encode(), partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        found = broker.transaction("payer")
        assert found is not None and found.state == "Ongoing"
    with Broker(settings) as broker:
        found = broker.transaction("payer")  # loaded at start: nobody asked for it
        assert found is not None and found.partitions in (((TOPIC, 0),), ())
        wait_until(lambda: broker.transaction("payer").state == "CompleteAbort",  # type: ignore[union-attr]
                   what="the open transaction to time out and abort")
        (offsets,) = broker.log_offsets(TOPIC, 0)
        wait_until(lambda: broker.log_offsets(TOPIC, 0)[0].last_stable_offset == offsets.log_end_offset,
                   what="the abort marker to release the last stable offset")
        assert offsets.log_end_offset == 4  # three records and the marker
        assert [a.producer_id for a in broker.log_offsets(TOPIC, 0)[0].aborted_transactions] == \
            [found.producer_id]
    del producer
