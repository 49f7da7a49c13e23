"""TxnOffsetCommit (28), v0-5: consumer offsets committed inside a producer's transaction.

Theory of operation
-------------------
Exactly-once pipelines (KIP-98, KIP-447) commit the offsets they consumed in the same
transaction as the records they produced. The producer first adds the group's partition of
``__consumer_offsets`` to its transaction (AddOffsetsToTxn, the transaction coordinator's), then
sends TxnOffsetCommit here, to the group coordinator. Kafka's checks, in its order:

1. WRITE on the TransactionalId, READ on the group, READ on each topic; unknown partitions per
   partition, as OffsetCommit;
2. a group id (INVALID_GROUP_ID if empty), and this broker coordinates the group
   (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, which v0-v1 get as COORDINATOR_NOT_AVAILABLE);
3. the group's offsets partition is in the producer's transaction (KIP-890's verification,
   asked of the transaction coordinator, ``TransactionCoordinatorLocator.verify_partitions``):
   TRANSACTION_ABORTABLE if not (INVALID_TXN_STATE before v4, which lacks the code). Asked of
   every version, as Kafka's ReplicaManager asks it: only while
   ``transaction.partition.verification.enable`` is on and the producer has no transaction open in
   that partition yet (``OffsetsTopicLog.needs_verification``);
4. the member and generation, as Kafka 4's group coordinator checks them
   (``ClassicCoordinator.check_txn_offset_commit``: an unknown group made only by a commit
   without a generation, ILLEGAL_GENERATION otherwise); for a KIP-848 consumer group the member
   and its epoch (``check_member``, Kafka's ``ConsumerGroup.validateOffsetCommit`` with a stale
   epoch answered ILLEGAL_GENERATION, as ``OffsetMetadataManager.validateTransactionalOffsetCommit``
   does);
5. too long metadata (OFFSET_METADATA_TOO_LARGE) per partition, the others written.

The offsets are then written to the group's partition as a transactional batch with the
producer's id and epoch (``OffsetsTopicLog.append_transactional``; the producer state there
refuses a fenced epoch) and held *pending* per producer id: invisible to OffsetFetch, which with
``require_stable`` answers UNSTABLE_OFFSET_COMMIT for such a partition. When the transaction
coordinator writes the marker into that partition (the data plane tells us, TxnMarkerEvents),
a COMMIT makes them the group's committed offsets and an ABORT drops them. A coordinator that
loads the partition later finds the same outcome in the log (``OffsetsTopicLog.replay``), and
the transactions still open there pending again.

One simplification against Kafka: a committed transaction's offsets replace the group's at the
marker, also over a plain OffsetCommit written between the TxnOffsetCommit and the marker
(Kafka keeps whichever record is later in the log). Exactly-once consumers do not mix the two.

When the transaction coordinator of the producer's id is another broker, step 3 is a verify-only
AddPartitionsToTxn sent to it (``verify_for_append``, as Kafka 3.6+'s AddPartitionsToTxnManager);
one that cannot be reached is answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable
from typing import Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.coordinator import ClassicCoordinator
from kafkapy.groups.offsets import metadata_too_large
from kafkapy.groups.offsets_log import OffsetsTopicLog
from kafkapy.groups.partitioning import OFFSETS_TOPIC
from kafkapy.groups.persistence import GroupLog, OpenTxnRecords
from kafkapy.groups.records import GroupRecord, OffsetCommitKey, OffsetCommitValue
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.conformance import conforms
from kafkapy.server.modules import Answer, RequestContext
from kafkapy.server.txn_coordinator import TransactionCoordinatorLocator
from kafkapy.server.txn_markers import TxnMarker

__all__ = ["TXN_OFFSET_COMMIT_VERSIONS", "PendingTxnOffsets", "TxnOffsetCommits"]

# v5 is v4 under KIP-890's transaction version 2, which this broker does not advertise: a client
# then uses at most v4 inside a transaction (TxnOffsetCommitRequest.json), and v5 is read as v4.
TXN_OFFSET_COMMIT_VERSIONS = VersionRange(0, 5)
_ABORTABLE_SINCE = 4  # TRANSACTION_ABORTABLE (KIP-890) exists from v4; INVALID_TXN_STATE before
# Producers before 2.0 (v0-v1) failed on COORDINATOR_LOAD_IN_PROGRESS here (KAFKA-7296): Kafka's
# KafkaApis answers them COORDINATOR_NOT_AVAILABLE instead, which they retry.
_LOADING_KNOWN_SINCE = 2
_NO_GENERATION = -1

Partition = tuple[str, int]


class PendingTxnOffsets:
    """Offsets written in transactions not ended yet, per producer id, group and partition."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[Partition, OffsetCommitValue]]] = {}

    def add(self, producer_id: int, records: Iterable[GroupRecord]) -> None:
        groups = self._by_producer.setdefault(producer_id, {})
        for record in records:
            key, value = record.key, record.value
            if isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue):
                groups.setdefault(key.group, {})[(key.topic, key.partition)] = value

    def complete(self, producer_id: int, in_partition: Callable[[str], bool]) -> list[GroupRecord]:
        """Take the producer's pending offsets of the groups ``in_partition`` (the marker's
        partition of ``__consumer_offsets``) out, as records to apply if it committed."""
        groups = self._by_producer.get(producer_id)
        if groups is None:
            return []
        taken: list[GroupRecord] = []
        for group in [g for g in groups if in_partition(g)]:
            for (topic, partition), value in groups.pop(group).items():
                taken.append(GroupRecord(OffsetCommitKey(group, topic, partition), value))
        if not groups:
            del self._by_producer[producer_id]
        return taken

    def of_group(self, group: str) -> list[tuple[int, str, int, OffsetCommitValue]]:
        """(producer id, topic, partition, offset) of every pending offset of ``group`` (inspection)."""
        return sorted(((producer_id, topic, partition, value)
                       for producer_id, groups in self._by_producer.items()
                       for (topic, partition), value in groups.get(group, {}).items()),
                      key=lambda row: row[:3])

    def groups(self) -> set[str]:
        return {group for groups in self._by_producer.values() for group in groups}

    def is_pending(self, group: str, topic: str, partition: int) -> bool:
        return any((topic, partition) in groups.get(group, {}) for groups in self._by_producer.values())

    def forget_topics(self, topics: Collection[str]) -> None:
        """Forget the pending offsets of deleted ``topics`` (Kafka's removeOffsets takes them out of
        pendingTransactionalOffsetCommits): a commit of their transaction no longer applies them."""
        for producer_id in list(self._by_producer):
            groups = self._by_producer[producer_id]
            for group in list(groups):
                offsets = groups[group]
                for key in [k for k in offsets if k[0] in topics]:
                    del offsets[key]
                if not offsets:
                    del groups[group]
            if not groups:
                del self._by_producer[producer_id]

    def drop(self, in_partition: Callable[[str], bool]) -> None:
        """Forget the groups ``in_partition``: this broker no longer coordinates them."""
        for producer_id in list(self._by_producer):
            groups = self._by_producer[producer_id]
            for group in [g for g in groups if in_partition(g)]:
                del groups[group]
            if not groups:
                del self._by_producer[producer_id]


class TxnOffsetCommits:
    """The groups module's TxnOffsetCommit handler and the pending offsets it keeps."""

    def __init__(self, *, coordinator: ClassicCoordinator, group_log: Callable[[], GroupLog],
                 check_coordinator: Callable[[str], None],
                 check_member: Callable[[str, int, str, str | None], None],
                 allowed: Callable[[RequestContext, str, str, str], bool],
                 partition_exists: Callable[[str, int], bool], verifier: Callable[[], object],
                 is_loaded: Callable[[int], bool], is_loading: Callable[[int], bool],
                 max_metadata_bytes: int) -> None:
        self.coordinator = coordinator
        self.pending = PendingTxnOffsets()
        self._group_log = group_log
        self._check_coordinator = check_coordinator
        self._check_member = check_member  # (group, generation or member epoch, member, instance id)
        self._allowed = allowed
        self._partition_exists = partition_exists
        self._verifier = verifier  # the TRANSACTION_COORDINATOR provider, if any
        self._is_loaded = is_loaded
        self._is_loading = is_loading
        # Markers written while a partition loads, after the replay's end: applied once it is loaded.
        self._ended_while_loading: dict[int, list[tuple[int, bool]]] = {}
        self._max_metadata_bytes = max_metadata_bytes

    # --- the request ----------------------------------------------------------------------------

    async def handle(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        version = ctx.api_version
        group_id = body["group_id"]
        asked = [(t["name"], p) for t in body.get("topics") or [] for p in t.get("partitions") or []]
        codes: dict[Partition, ErrorCode] = {}
        if not self._allowed(ctx, "WRITE", "TRANSACTIONAL_ID", body["transactional_id"]):
            codes = {(name, p["partition_index"]): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                     for name, p in asked}
        elif not self._allowed(ctx, "READ", "GROUP", group_id):
            codes = {(name, p["partition_index"]): ErrorCode.GROUP_AUTHORIZATION_FAILED for name, p in asked}
        else:
            codes = await self._commit(ctx, body, asked)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, partition), code in codes.items():
            if code == ErrorCode.TRANSACTION_ABORTABLE and version < _ABORTABLE_SINCE:
                code = ErrorCode.INVALID_TXN_STATE
            elif code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < _LOADING_KNOWN_SINCE:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            by_topic.setdefault(name, []).append({"partition_index": partition, "error_code": code})
        return fit_body(ApiKey.TXN_OFFSET_COMMIT, "response", version, {
            "throttle_time_ms": 0, "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()]})

    async def _commit(self, ctx: RequestContext, body: dict[str, Any],
                      asked: list[tuple[str, dict[str, Any]]]) -> dict[Partition, ErrorCode]:
        group_id = body["group_id"]
        codes: dict[Partition, ErrorCode] = {}
        now = self.coordinator.timers.wall_ms()
        records: list[GroupRecord] = []
        too_long: list[Partition] = []  # judged once the request passed the group's checks, as Kafka 4
        readable: dict[str, bool] = {}
        for name, p in asked:
            key = (name, p["partition_index"])
            metadata = p.get("committed_metadata") or ""
            if not readable.setdefault(name, self._allowed(ctx, "READ", "TOPIC", name)):
                codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not self._partition_exists(*key):
                codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata_too_large(metadata, self._max_metadata_bytes):
                codes[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                too_long.append(key)
            else:
                codes[key] = ErrorCode.NONE
                records.append(GroupRecord(OffsetCommitKey(group_id, *key), OffsetCommitValue(
                    p["committed_offset"], p.get("committed_leader_epoch", -1), metadata, now)))
        if not records and not too_long:
            return codes
        try:
            written = await self._write(body, records)
        except KafkaApiError as exc:
            written = exc.code
        if written != ErrorCode.NONE:
            codes.update(dict.fromkeys(too_long, written))
        for record in records:
            assert isinstance(record.key, OffsetCommitKey)
            codes[(record.key.topic, record.key.partition)] = written
        return codes

    async def _write(self, body: dict[str, Any], records: list[GroupRecord]) -> ErrorCode:
        group_id, producer_id, epoch = body["group_id"], body["producer_id"], body["producer_epoch"]
        if not group_id:  # Kafka's GroupCoordinatorService refuses it before anything else
            return ErrorCode.INVALID_GROUP_ID
        self._check_coordinator(group_id)
        log = self._group_log()
        if not isinstance(log, OffsetsTopicLog):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # only the offsets topic keeps transactions
        if log.needs_verification(group_id, producer_id):
            verified = await self._verify(body["transactional_id"], producer_id, epoch,
                                          (OFFSETS_TOPIC, log.partition_for(group_id)))
            if verified != ErrorCode.NONE:
                return verified
        self._check_member(group_id, body.get("generation_id", _NO_GENERATION), body.get("member_id", ""),
                           body.get("group_instance_id"))
        if records:
            await log.append_transactional(group_id, records, producer_id, epoch)
            self.pending.add(producer_id, records)
        return ErrorCode.NONE

    async def _verify(self, transactional_id: str, producer_id: int, epoch: int,
                      partition: Partition) -> ErrorCode:
        verifier = self._verifier()
        if not conforms(verifier, TransactionCoordinatorLocator):
            return ErrorCode.NONE  # no transaction coordinator here to ask
        answered = verifier.verify_for_append(transactional_id, producer_id, epoch, [partition])
        codes = await answered if inspect.isawaitable(answered) else answered
        code = codes[partition]
        if code == ErrorCode.NETWORK_EXCEPTION:
            # the coordinator could not be asked: a code older clients retry without a lookup
            # (Kafka's CoordinatorOperationExceptionHelper)
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return code

    # --- markers, loading, unloading -------------------------------------------------------------

    def on_marker(self, marker: TxnMarker, topic: str, partition: int) -> None:
        """TxnMarkerEvents: a marker written into one of our ``__consumer_offsets`` partitions
        ends the producer's pending offsets of the groups kept there."""
        if topic != OFFSETS_TOPIC:
            return
        if self._is_loaded(partition):
            self._end(partition, marker.producer_id, marker.committed)
        elif self._is_loading(partition):
            self._ended_while_loading.setdefault(partition, []).append((marker.producer_id, marker.committed))

    def _end(self, partition: int, producer_id: int, committed: bool) -> None:
        log = self._group_log()
        ended = self.pending.complete(producer_id, lambda group: log.partition_for(group) == partition)
        if committed:
            for record in ended:
                assert isinstance(record.key, OffsetCommitKey) and isinstance(record.value, OffsetCommitValue)
                self.coordinator.offsets.put(record.key, record.value)

    def load(self, partition: int, open_txns: Iterable[OpenTxnRecords]) -> None:
        """The transactions a replay of ``partition`` found open: pending again until their
        marker (or ended now, by one written while the partition was loading)."""
        for txn in open_txns:
            self.pending.add(txn.producer_id, txn.records)
        for producer_id, committed in self._ended_while_loading.pop(partition, []):
            self._end(partition, producer_id, committed)

    def unload(self, partition: int) -> None:
        self._ended_while_loading.pop(partition, None)
        log = self._group_log()
        self.pending.drop(lambda group: log.partition_for(group) == partition)
