"""share.isolation.level=read_committed with real clients: confluent-kafka's transactional
producers commit, abort and leave a transaction open on a partition two share groups consume,
one set to read_committed through IncrementalAlterConfigs on its GROUP resource (as against
Kafka 4.1), the other left at read_uncommitted. The read_committed group's ShareConsumer gets
exactly the committed records, the open transaction's once it commits and nothing past it
before; its start offset ends at the high watermark (aborted records and markers archived, as
the persisted state says too). The read_uncommitted group gets every data record."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until
from tests.shares.share_wire_client import TOPIC

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")


def _set_group_configs(broker: Broker, group: str, configs: dict[str, str]) -> None:
    admin = ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entries = [ck_admin.ConfigEntry(k, v, incremental_operation=ck_admin.AlterConfigOpType.SET)
               for k, v in configs.items()]
    resource = ck_admin.ConfigResource(ck_admin.ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        assert future.result(10) is None


def _share_consumer(broker: Broker, group: str) -> Any:
    consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                 "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TOPIC])
    return consumer


def _poll(consumer: Any, got: list[bytes], seconds: float, until: int | None = None) -> list[bytes]:
    """Poll (accepting each record) for ``seconds``, or until ``until`` records were got."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (until is None or len(got) < until):
        for message in consumer.poll(0.2):
            if message.error() is None:
                got.append(message.value())
                consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
    return got


def _transactional(broker: Broker, transactional_id: str) -> Any:
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers,
                            "transactional.id": transactional_id, "linger.ms": 0})
    producer.init_transactions(20)
    return producer


def _transaction(producer: Any, values: list[bytes], *, commit: bool | None) -> None:
    """One transaction of ``values``: committed, aborted, or (None) left open."""
    producer.begin_transaction()
    for value in values:
        producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(10) == 0
    if commit is True:
        producer.commit_transaction(20)
    elif commit is False:
        producer.abort_transaction(20)


def test_a_read_committed_share_group_gets_exactly_the_committed_records() -> None:
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}) as broker:
        broker.seed({TOPIC: {"partitions": 1}})
        _set_group_configs(broker, "committed", {"share.isolation.level": "read_committed",
                                                 "share.auto.offset.reset": "earliest"})
        _set_group_configs(broker, "everything", {"share.auto.offset.reset": "earliest"})
        writer, lingerer = _transactional(broker, "writer"), _transactional(broker, "lingerer")
        first = [b"first-%d" % i for i in range(3)]
        aborted = [b"aborted-%d" % i for i in range(4)]
        held = [b"held-%d" % i for i in range(2)]
        last = [b"last-%d" % i for i in range(3)]
        _transaction(writer, first, commit=True)
        _transaction(writer, aborted, commit=False)
        _transaction(lingerer, held, commit=None)  # open: the last stable offset stops here
        _transaction(writer, last, commit=True)  # committed, but past the open transaction

        committed, everything = _share_consumer(broker, "committed"), _share_consumer(broker, "everything")
        try:
            got = _poll(committed, [], 20, until=len(first))
            _poll(committed, got, 3)  # and nothing more while the transaction is open
            assert sorted(got) == sorted(first)
            seen = _poll(everything, [], 20, until=len(first + aborted + held + last))
            assert sorted(seen) == sorted(first + aborted + held + last)

            lingerer.commit_transaction(20)
            _poll(committed, got, 20, until=len(first + held + last))
            _poll(committed, got, 2)
            assert sorted(got) == sorted(first + held + last)  # each once: nothing aborted, no marker
        finally:
            committed.close()
            everything.close()
        high_watermark = 3 + 1 + 4 + 1 + 2 + 3 + 1 + 1  # each transaction's records and its marker
        wait_until(lambda: [(v.start_offset, v.records) for v in broker.share_partitions("committed")]
                   == [(high_watermark, ())], what="the read_committed group's start offset at the end")
        with SimpleClient(broker.bootstrap_servers) as client:  # the share coordinator's, as written
            wait_until(lambda: _persisted(client, "committed") == (high_watermark, 0),
                       what="the persisted start offset and lag")


def _persisted(client: SimpleClient, group: str) -> tuple[int, int]:
    answer = client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
        {"group_id": group, "topics": [{"topic_name": TOPIC, "partitions": [0]}]}]})
    (partition,) = answer["groups"][0]["topics"][0]["partitions"]
    return partition["start_offset"], partition["lag"]
