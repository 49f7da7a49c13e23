"""``kafkapy transactions`` as a process, against the coordinator with a real transactional
producer: list, describe, describe-producers, find-hanging and abort with kafka-transactions.sh's
columns, and its one-line errors."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import confluent_kafka
import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
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
    # KIP-890's verification off: _hanging_transaction makes the hanging transaction it prevents
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5,
                 "transaction.partition.verification.enable": False}, store=store) as running:
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


def test_a_topic_that_does_not_exist_fails_at_once(broker: tuple[Broker, confluent_kafka.Producer]) -> None:
    """As Kafka's admin client fails a partition of a topic Metadata does not know, where kafkapy
    asked for its leader again until --timeout ran out (10 s)."""
    running, _ = broker
    for args in (("describe-producers", "--topic", "nope", "--partition", "0"),
                 ("abort", "--topic", "nope", "--partition", "0", "--start-offset", "0")):
        started = time.monotonic()
        result = transactions(running, *args)
        assert time.monotonic() - started < 5
        assert result.returncode == 1
        assert result.stderr.decode().strip().endswith("nope-0: UNKNOWN_TOPIC_OR_PARTITION"), result.stderr


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


def _hanging_transaction(broker: Broker, topic: str, partition: int, age_ms: int) -> tuple[int, int]:
    """An open transaction no coordinator knows, its last write ``age_ms`` old: what a lost
    marker leaves (a transactional batch from an idempotent producer id, which a leader takes only
    with KIP-890's verification off, as the fixture has it). Answers the producer id and the start
    offset."""
    with SimpleClient(broker.bootstrap_servers, 10.0, "hang") as client:
        init = client.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                           "transaction_timeout_ms": 60_000,
                                                           "producer_id": -1, "producer_epoch": -1})
        producer_id = init["producer_id"]
        batch = build_record_batch([(None, b"stuck", [], int(time.time() * 1000) - age_ms)],
                                   producer_id=producer_id, producer_epoch=init["producer_epoch"],
                                   base_sequence=0, is_transactional=True)
        answer = client.request(ApiKey.PRODUCE, 9, {
            "transactional_id": "lost", "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        [written] = answer["responses"][0]["partition_responses"]
        assert written["error_code"] == ErrorCode.NONE, written
        return producer_id, written["base_offset"]


HANGING_HEADER = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                  "LastTimestamp", "Duration(min)"]


def test_find_hanging_then_abort(broker: tuple[Broker, confluent_kafka.Producer]) -> None:
    running, producer = broker
    producer_id, start = _hanging_transaction(running, "out", 0, age_ms=60 * 60_000)
    # etl's transaction on out-1 is open too, its last write as old, but its coordinator holds out-1:
    # its marker will come, so it is not hanging
    producer.produce("out", value=b"old", partition=1, timestamp=int(time.time() * 1000) - 60 * 60_000)
    assert producer.flush(10) == 0
    header, *found = rows(transactions(running, "find-hanging", "--topic", "out"))
    assert header == HANGING_HEADER
    assert [[*row[:4], row[5]] for row in found] == [["out", "0", str(producer_id), "0", str(start)]]
    assert 59 <= int(found[0][7]) <= 61
    assert rows(transactions(running, "find-hanging", "--broker-id", "1"))[1:] == found
    assert rows(transactions(running, "find-hanging", "--topic", "out", "--partition", "0"))[1:] == found
    # a longer timeout puts it out of scope
    assert rows(transactions(running, "find-hanging", "--topic", "out", "--max-transaction-timeout",
                             "90")) == [HANGING_HEADER]
    aborted = transactions(running, "abort", "--topic", "out", "--partition", "0",
                           "--start-offset", str(start))
    assert (aborted.returncode, aborted.stderr) == (0, b"")
    assert rows(transactions(running, "find-hanging", "--topic", "out")) == [HANGING_HEADER]
    # the abort marker ended it: read_committed reads past the stuck record
    producer.commit_transaction(10)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap_servers, "group.id": "reader",
                                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                         "enable.partition.eof": True})
    consumer.assign([confluent_kafka.TopicPartition("out", p, 0) for p in (0, 1)])
    values, ended = [], set()
    deadline = time.monotonic() + 20
    while len(ended) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            ended.add(message.partition())
            continue
        values.append(message.value())
    consumer.close()
    assert values == [b"open", b"old"]  # etl's, committed; never the stuck record


def test_find_hanging_needs_a_scope(broker: tuple[Broker, confluent_kafka.Producer]) -> None:
    running, _ = broker
    unscoped = transactions(running, "find-hanging")
    assert (unscoped.returncode, unscoped.stderr.decode().strip()) == (
        1, "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the "
           "search")
    partition_only = transactions(running, "find-hanging", "--broker-id", "1", "--partition", "0")
    assert (partition_only.returncode, partition_only.stderr.decode().strip()) == (
        1, "The --partition argument requires --topic to be provided")
