"""Hypothesis: random interleavings of plain, idempotent and transactional produces, commits,
aborts and stale markers on several partitions of a broker, against a model of what a
read_committed and a read_uncommitted consumer must see (over Fetch, and as ``broker.records``'
isolation views and ``broker.snapshot()`` give it).

Everything goes over the wire with kafkapy's codec (Produce, WriteTxnMarkers, Fetch,
ListOffsets), except that some transactions are ended through the TXN_MARKERS capability the
transaction coordinator uses. The "consumer" applies a Fetch response as Kafka's consumer does
(CompletedFetch: aborted transactions by first offset, skip an aborted producer's batches until
its ABORT marker, never show control batches), so the check covers the aborted list, the last
stable offset and the records together."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from kafkapy.client import SimpleClient
from kafkapy.commands._partitions import fetched_partition
from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.inspection import Isolation
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import RecordBatch, build_record_batch
from kafkapy.server.txn_markers import TxnMarker
from tests.soak import soaked

PARTITIONS = 3
PRODUCERS = 3
COORDINATOR_EPOCH = 0
_topics = itertools.count()
_broker: Broker | None = None


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    global _broker
    # the data plane's half alone, with no coordinator: KIP-890's verification off
    with Broker({"broker.id": 1, "transaction.partition.verification.enable": False}) as running:
        _broker = running
        yield running
    _broker = None


def visible(partition: Any, fetch_offset: int, read_committed: bool) -> tuple[list[tuple[int, bytes]], int]:
    """What a consumer makes of one partition's Fetch answer (Kafka's CompletedFetch), and the
    offset after the last batch it was given."""
    aborted = sorted(partition["aborted_transactions"] or [], key=lambda t: t["first_offset"])
    aborted_producers: set[int] = set()
    seen: list[tuple[int, bytes]] = []
    end = fetch_offset
    for batch in partition["records"].batches():
        assert isinstance(batch, RecordBatch)
        end = batch.last_offset + 1
        if read_committed and batch.producer_id >= 0:
            while aborted and aborted[0]["first_offset"] <= batch.last_offset:
                aborted_producers.add(aborted.pop(0)["producer_id"])
            if batch.is_control:
                key = batch.record_list()[0].key or b""
                if key[2:4] == b"\x00\x00":  # an ABORT marker ends that producer's aborted run
                    aborted_producers.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted_producers:
                continue
        if batch.is_control:
            continue
        seen.extend((r.offset, r.value or b"") for r in batch.record_list() if r.offset >= fetch_offset)
    return seen, end


@attrs.define
class Producer:
    producer_id: int
    epoch: int = 0
    serial: int = 0  # which of its transactions is current
    sequences: dict[int, int] = attrs.field(factory=dict)  # next base sequence per partition

    def next_sequence(self, partition: int, count: int) -> int:
        sequence = self.sequences.get(partition, 0)
        self.sequences[partition] = sequence + count
        return sequence


@attrs.define
class Record:
    offset: int
    value: bytes
    txn: tuple[int, int] | None  # (producer id, serial) of a transactional record


class TransactionsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        broker = _broker
        assert broker is not None and broker.store is not None and broker.runtime is not None
        self.broker = broker
        self.topic = f"txn-model-{next(_topics)}"
        broker.store.create_topic(self.topic, {p: (1,) for p in range(PARTITIONS)})
        while self.topic not in broker.runtime.cluster.topics:
            time.sleep(0.001)
        self.client = SimpleClient(broker.bootstrap_servers)
        self.producers = [Producer(self._init_producer_id()) for _ in range(PRODUCERS)]
        self.records: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
        self.log_end: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        self.open: dict[int, dict[int, int]] = {p: {} for p in range(PARTITIONS)}  # pid -> first offset
        self.outcome: dict[tuple[int, int], bool] = {}  # txn -> committed
        self.epoch_seen: dict[tuple[int, int], int] = {}  # (partition, pid) -> newest epoch there
        self.counter = itertools.count()

    def teardown(self) -> None:
        self.client.close()

    def _init_producer_id(self) -> int:
        answer = self.client.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1})
        assert answer["error_code"] == ErrorCode.NONE
        return int(answer["producer_id"])

    def _produce(self, partition: int, batch: bytes, transactional_id: str | None) -> dict[str, Any]:
        body = {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": self.topic, "partition_data": [{"index": partition, "records": batch}]}]}
        [topic] = self.client.request(ApiKey.PRODUCE, 9, body)["responses"]
        [answer] = topic["partition_responses"]
        return dict(answer)

    def _values(self, count: int) -> list[bytes]:
        return [b"v%d" % next(self.counter) for _ in range(count)]

    def _lso(self, partition: int) -> int:
        return min(self.open[partition].values(), default=self.log_end[partition])

    # -- produces ------------------------------------------------------------------------------

    @rule(partition=st.integers(0, PARTITIONS - 1), count=st.integers(1, 3))
    def plain(self, partition: int, count: int) -> None:
        values = self._values(count)
        answer = self._produce(partition, build_record_batch([{"value": v} for v in values]), None)
        assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, self.log_end[partition])
        self._stored(partition, values, None)

    def _stored(self, partition: int, values: list[bytes], txn: tuple[int, int] | None) -> None:
        start = self.log_end[partition]
        self.records[partition].extend(Record(start + i, v, txn) for i, v in enumerate(values))
        self.log_end[partition] = start + len(values)

    @rule(who=st.integers(0, PRODUCERS - 1), partition=st.integers(0, PARTITIONS - 1),
          count=st.integers(1, 3))
    def transactional(self, who: int, partition: int, count: int) -> None:
        producer = self.producers[who]
        values = self._values(count)
        batch = build_record_batch([{"value": v} for v in values], producer_id=producer.producer_id,
                                   producer_epoch=producer.epoch, is_transactional=True,
                                   base_sequence=producer.next_sequence(partition, count))
        answer = self._produce(partition, batch, f"tx-{who}")
        assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, self.log_end[partition])
        self.open[partition].setdefault(producer.producer_id, self.log_end[partition])
        self.epoch_seen[partition, producer.producer_id] = producer.epoch
        self._stored(partition, values, (producer.producer_id, producer.serial))

    @rule(who=st.integers(0, PRODUCERS - 1), partition=st.integers(0, PARTITIONS - 1))
    def idempotent(self, who: int, partition: int) -> None:
        """A non-transactional batch from a producer: INVALID_TXN_STATE while its transaction is
        open in the partition, else stored like any idempotent batch."""
        producer = self.producers[who]
        values = self._values(1)
        sequence = producer.sequences.get(partition, 0)
        batch = build_record_batch([{"value": v} for v in values], producer_id=producer.producer_id,
                                   producer_epoch=producer.epoch, base_sequence=sequence)
        answer = self._produce(partition, batch, None)
        if producer.producer_id in self.open[partition]:
            assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.INVALID_TXN_STATE, -1)
            return
        assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, self.log_end[partition])
        producer.next_sequence(partition, 1)
        self.epoch_seen[partition, producer.producer_id] = producer.epoch
        self._stored(partition, values, None)

    @rule(partition=st.integers(0, PARTITIONS - 1))
    def transactional_without_an_id(self, partition: int) -> None:
        """Kafka refuses transactional records from a request without a transactional id."""
        batch = build_record_batch([{"value": b"x"}], producer_id=self.producers[0].producer_id,
                                   producer_epoch=0, is_transactional=True, base_sequence=0)
        answer = self._produce(partition, batch, None)
        assert answer["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # -- markers -------------------------------------------------------------------------------

    @rule(who=st.integers(0, PRODUCERS - 1), commit=st.booleans(), via_capability=st.booleans(),
          extra=st.none() | st.integers(0, PARTITIONS - 1))
    def end(self, who: int, commit: bool, via_capability: bool, extra: int | None) -> None:
        """The coordinator ends the producer's transaction: a marker in each partition it wrote
        to (and maybe one it did not: that marker completes nothing)."""
        producer = self.producers[who]
        pid = producer.producer_id
        partitions = sorted({p for p in range(PARTITIONS) if pid in self.open[p]} | (
            {extra} if extra is not None else set()))
        if not partitions:
            return
        marker = TxnMarker(pid, producer.epoch, commit, COORDINATOR_EPOCH,
                           tuple((self.topic, p) for p in partitions))
        if via_capability:
            errors = self._write_through_capability(marker)
        else:
            errors = self._write_on_the_wire(marker)
        assert errors == {p: ErrorCode.NONE for p in partitions}
        for p in partitions:
            self.open[p].pop(pid, None)
            self.epoch_seen[p, pid] = producer.epoch
            self.log_end[p] += 1
        self.outcome[pid, producer.serial] = commit
        producer.serial += 1
        for p in partitions:  # what a read_committed consumer from the start sees now
            self.consume(p, 0.0, True, 1 << 20)

    def _write_through_capability(self, marker: TxnMarker) -> dict[int, ErrorCode]:
        assert self.broker.runtime is not None
        [module] = [m for m in self.broker.runtime.modules if isinstance(m, DataPlaneModule)]
        done = self.broker._on_loop(lambda: module.write_markers([marker]))
        return {p: code for (_, _, p), code in done.items()}

    def _write_on_the_wire(self, marker: TxnMarker) -> dict[int, ErrorCode]:
        body = {"markers": [{
            "producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
            "transaction_result": marker.committed, "coordinator_epoch": marker.coordinator_epoch,
            "topics": [{"name": self.topic, "partition_indexes": [p for _, p in marker.partitions]}]}]}
        [result] = self.client.request(ApiKey.WRITE_TXN_MARKERS, 1, body)["markers"]
        assert result["producer_id"] == marker.producer_id
        return {p["partition_index"]: ErrorCode(p["error_code"])
                for topic in result["topics"] for p in topic["partitions"]}

    @precondition(lambda self: any(
        not any(p.producer_id in self.open[q] for q in range(PARTITIONS)) for p in self.producers))
    @rule(who=st.integers(0, PRODUCERS - 1))
    def bump_epoch(self, who: int) -> None:
        """A new epoch between transactions (as InitProducerId gives a restarted producer)."""
        producer = self.producers[who]
        if any(producer.producer_id in self.open[q] for q in range(PARTITIONS)):
            return
        producer.epoch += 1
        producer.sequences.clear()

    @rule(who=st.integers(0, PRODUCERS - 1), partition=st.integers(0, PARTITIONS - 1), commit=st.booleans())
    def stale_marker(self, who: int, partition: int, commit: bool) -> None:
        """A marker from an epoch older than one the partition has seen: INVALID_PRODUCER_EPOCH,
        nothing written, the transaction still open."""
        producer = self.producers[who]
        seen = self.epoch_seen.get((partition, producer.producer_id))
        if seen is None or seen == 0:
            return
        marker = TxnMarker(producer.producer_id, seen - 1, commit, COORDINATOR_EPOCH,
                           ((self.topic, partition),))
        assert self._write_on_the_wire(marker) == {partition: ErrorCode.INVALID_PRODUCER_EPOCH}

    # -- what consumers see --------------------------------------------------------------------

    def _fetch(self, partition: int, offset: int, read_committed: bool, max_bytes: int) -> Any:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": int(read_committed), "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": self.topic, "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes,
                     "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        [topic] = self.client.request(ApiKey.FETCH, 12, body)["responses"]
        [answer] = topic["partitions"]
        assert answer["error_code"] == ErrorCode.NONE
        return answer

    def _expected(self, partition: int, start: int, end: int,
                  read_committed: bool) -> list[tuple[int, bytes]]:
        lso = self._lso(partition)
        return [(r.offset, r.value) for r in self.records[partition]
                if start <= r.offset < end and not (read_committed and (
                    r.offset >= lso or (r.txn is not None and self.outcome.get(r.txn) is False)))]

    @rule(partition=st.integers(0, PARTITIONS - 1), where=st.floats(0, 1), read_committed=st.booleans(),
          max_bytes=st.sampled_from([1, 150, 1 << 20]))
    def consume(self, partition: int, where: float, read_committed: bool, max_bytes: int) -> None:
        log_end = self.log_end[partition]
        offset = int(where * log_end)
        answer = self._fetch(partition, offset, read_committed, max_bytes)
        lso = self._lso(partition)
        assert (answer["high_watermark"], answer["last_stable_offset"]) == (log_end, lso)
        if not read_committed:
            assert answer["aborted_transactions"] is None
        seen, end = visible(answer, offset, read_committed)
        cli = fetched_partition(answer["records"], offset, answer["high_watermark"],  # kafkapy consume's
                                answer["last_stable_offset"] if read_committed else None,
                                answer["aborted_transactions"] or ())
        assert [(r.offset, r.value or b"") for r in cli.records] == seen
        limit = lso if read_committed else log_end
        assert end <= max(offset, limit)  # nothing past the limit (past it, nothing at all)
        assert seen == self._expected(partition, offset, end, read_committed)
        if max_bytes == 1 << 20:  # everything readable fits: the consumer got all of it (an open
            # transaction starts a batch, so no batch straddles the LSO)
            assert end == max(offset, limit)

    @rule(partition=st.integers(0, PARTITIONS - 1), read_committed=st.booleans())
    def list_offsets_latest(self, partition: int, read_committed: bool) -> None:
        body = {"replica_id": -1, "isolation_level": int(read_committed), "topics": [
            {"name": self.topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                 "timestamp": -1}]}]}
        [topic] = self.client.request(ApiKey.LIST_OFFSETS, 7, body)["topics"]
        [answer] = topic["partitions"]
        assert answer["offset"] == (self._lso(partition) if read_committed else self.log_end[partition])


    @rule(partition=st.integers(0, PARTITIONS - 1), where=st.floats(0, 1),
          isolation=st.sampled_from([Isolation.READ_UNCOMMITTED, Isolation.READ_COMMITTED]))
    def inspect(self, partition: int, where: float, isolation: Isolation) -> None:
        """``broker.records(isolation=...)`` is what the consumer of that level keeps, to its limit."""
        read_committed = isolation is Isolation.READ_COMMITTED
        start = int(where * self.log_end[partition])
        limit = self._lso(partition) if read_committed else self.log_end[partition]
        got = [(r.offset, r.value)
               for r in self.broker.records(self.topic, partition, start, isolation=isolation)]
        assert got == self._expected(partition, start, max(start, limit), read_committed)

    @rule()
    def snapshot(self) -> None:
        """A snapshot keeps plain records and committed transactions' records, in order: not the
        aborted ones, nor those of transactions still open (a restore drops the transactions)."""
        kept = self.broker.snapshot().topics[self.topic]["records"]
        for partition in range(PARTITIONS):
            expected = [r.value for r in self.records[partition]
                        if r.txn is None or self.outcome.get(r.txn) is True]
            assert [r["value"] for r in kept if r["partition"] == partition] == expected


def test_transactions_against_a_model(broker: Broker) -> None:
    run_state_machine_as_test(TransactionsMachine, settings=soaked(settings(
        max_examples=60, stateful_step_count=30, deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])))
