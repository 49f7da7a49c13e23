"""``kafkapy transactions`` as a process, against the coordinator with a real transactional
producer: list, describe and describe-producers with kafka-transactions.sh's columns, and its
one-line errors. (``abort`` writes WriteTxnMarkers, which the data plane's half serves; it is
tested once that half is merged.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import confluent_kafka
import pytest

from kafkapy.embedded import Broker
from kafkapy.store import MemoryStore
from tests.commands.records_cli import kafkapy

from .test_transactions_wire import coordinator_ready


def transactions(broker: Broker, *args: str) -> subprocess.CompletedProcess[bytes]:
    return kafkapy("transactions", "--bootstrap-server", broker.bootstrap_servers, *args)


def rows(result: subprocess.CompletedProcess[bytes]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert all(line.endswith("\t") for line in lines)  # prettyPrintTable ends every cell with a tab
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]


@pytest.fixture()
def broker() -> Iterator[tuple[Broker, confluent_kafka.Producer]]:
    store = MemoryStore()
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}, store=store) as running:
        store.create_topic("out", {0: (1,), 1: (1,)})
        coordinator_ready(running)
        producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap_servers,
                                             "transactional.id": "etl", "transaction.timeout.ms": 45_000})
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce("out", value=b"open", partition=1)
        assert producer.flush(10) == 0
        yield running, producer


def test_list_and_describe(broker: tuple[Broker, confluent_kafka.Producer]) -> None:
    running, _ = broker
    assert rows(transactions(running, "list")) == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], ["etl", "1", "0", "Ongoing"]]
    assert rows(transactions(running, "list", "--duration-filter", "3600000")) == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]]
    header, row = rows(transactions(running, "describe", "--transactional-id", "etl"))
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                      "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"]
    described = dict(zip(header, row, strict=True))
    assert {k: described[k] for k in ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                      "TransactionState", "TransactionTimeoutMs", "TopicPartitions")} == {
        "CoordinatorId": "1", "TransactionalId": "etl", "ProducerId": "0", "ProducerEpoch": "0",
        "TransactionState": "Ongoing", "TransactionTimeoutMs": "45000", "TopicPartitions": "out-1"}
    assert 0 <= int(described["TransactionDurationMs"]) < 60_000


def test_describe_producers(broker: tuple[Broker, confluent_kafka.Producer]) -> None:
    running, _ = broker
    described = transactions(running, "describe-producers", "--topic", "out", "--partition", "1")
    header, *producers = rows(described)
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                      "LastTimestamp", "CurrentTransactionStartOffset"]
    assert [p[:2] for p in producers] == [["0", "0"]]


def test_errors_are_one_line(broker: tuple[Broker, confluent_kafka.Producer]) -> None:
    running, _ = broker
    missing = transactions(running, "describe", "--transactional-id", "nobody")
    assert missing.returncode == 1
    assert missing.stderr.decode().strip() == (
        "Failed to describe transaction state of transactional-id `nobody`: "
        "describe transactional id 'nobody': TRANSACTIONAL_ID_NOT_FOUND")
    unnamed = transactions(running, "abort", "--topic", "out", "--partition", "1")
    assert unnamed.returncode == 1
    assert "must be identified either with --start-offset" in unnamed.stderr.decode()
    no_such = transactions(running, "abort", "--topic", "out", "--partition", "1", "--start-offset", "99")
    assert no_such.stderr.decode().strip() == (
        "Could not find any open transactions starting at offset 99 on partition out-1")


def test_consume_with_the_transaction_log_formatter(broker: tuple[Broker, confluent_kafka.Producer]) -> None:
    """``kafkapy consume --formatter transaction-log`` prints what the coordinator wrote for the
    open transaction, as Kafka's TransactionLogMessageFormatter does."""
    running, _ = broker
    consumed = kafkapy("consume", "-b", running.bootstrap_servers, "-t", "__transaction_state", "-e",
                       "--formatter", "transaction-log")
    assert consumed.returncode == 0, consumed.stderr.decode()
    lines = [json.loads(line) for line in consumed.stdout.decode().splitlines()]
    assert lines and all(line["key"] == {"version": 0, "data": {"transactionalId": "etl"}} for line in lines)
    last = lines[-1]["value"]["data"]
    assert last["transactionStatus"] == 1  # Ongoing, Kafka's TransactionState id
    assert last["transactionPartitions"] == [{"topic": "out", "partitionIds": [1]}]
    assert last["transactionTimeoutMs"] == 45_000
