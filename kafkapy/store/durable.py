"""The in-memory store kept on disk: what a broker with ``log.dirs`` and no ZooKeeper stores.

Kafka in KRaft mode keeps its cluster metadata in a metadata log under ``metadata.log.dir`` (the
first of ``log.dirs`` by default), so a restart, clean or not, loses nothing it acknowledged.
DurableStore is MemoryStore with the same promise: every lasting change (kafkapy.store.changes)
is written to the journal (kafkapy.store.journal) before it is made, under the store's lock, so
before any watch or reader sees it and before the call that made it returns; it is fsynced as the
flush policy says (the partition logs' log.flush.interval.messages and .ms: by default the OS
writes back, as for the records; 1 message fsyncs each change, as Kafka's metadata log is).
``start()`` replays the snapshot and journal into the state. The format is kafkapy's own, not
KRaft's records.

What outlives the process: the cluster id, topics (ids, partitions, assignments) and their
configs, every entity config (quotas, SCRAM credentials, dynamic broker configs), ACLs, finalized
features, the producer-id block (so no id is handed out twice), partition states (so leader
epochs never go back), the generated broker id sequence and seed 001's persistent nodes. What does
not: broker registrations, the controller and coordinator elections and the offline replicas,
ephemeral as in a ZooKeeper session.

``adopts`` says whether the runtime is to adopt the topics of log dirs an older kafkapy wrote
(kafkapy.server.adoption; the store itself reads no partition directory): ``start()`` read no
change at all (a first start), or an adoption begun (``begin_adoption``) was never ended, as the
broker was killed between two of its topics: the next start then makes the topics still missing.

Handles made by ``peer()`` share the state and the journal, as MemoryStore's do; the files are
released (their lock too) when the last handle closes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from kafkapy.log.checkpoint import fsync_directory
from kafkapy.store.base import StoreError
from kafkapy.store.changes import (
    AclsWritten,
    BrokerSequence,
    Change,
    ConfigWritten,
    FeaturesWritten,
    MembersWritten,
    OffsetsCommitted,
    OwnersWritten,
    PartitionStateWritten,
    ProducerIdsAllocated,
    TopicWritten,
    from_json,
    to_json,
)
from kafkapy.store.journal import DEFAULT_SNAPSHOT_BYTES, NEVER, MetadataJournal
from kafkapy.store.memory import MemoryStore, _Cluster, apply_change

__all__ = ["ADOPTING_FILE", "DurableStore", "state_changes"]

# Present while log dirs are being adopted (begin_adoption to end_adoption).
ADOPTING_FILE = "kafkapy-metadata.adopting"

log = logging.getLogger(__name__)


def state_changes(cluster: _Cluster) -> Iterator[Change]:
    """The lasting state as changes that make it from nothing: a snapshot's content."""
    c = cluster
    if c.next_generated_id is not None:
        yield BrokerSequence(c.next_generated_id)
    if c.feature_epoch >= 0:
        yield FeaturesWritten(c.feature_epoch, c.features)
    for _, info in sorted(c.topics.iter_items()):
        yield TopicWritten(info, None)
    for path, config in sorted(c.configs.items()):  # the topics' overrides among them
        yield ConfigWritten(path, config)
    for key, state in sorted(c.partition_states.iter_items()):
        yield PartitionStateWritten(key[0], key[1], state)
    if c.producer_id_block is not None:
        yield ProducerIdsAllocated(c.producer_id_block)
    for resource, (acls, version) in c.acls.items():
        yield AclsWritten(resource, acls, version)
    for group, owners in sorted(c.owners.items()):
        yield OwnersWritten(group, owners)
    for group, members in sorted(c.members.items()):
        yield MembersWritten(group, members)
    for group, offsets in sorted(c.offsets.items()):
        yield OffsetsCommitted(group, offsets)


class _JournalSink:
    """Each change to the journal, after a snapshot when the journal has grown enough."""

    def __init__(self, journal: MetadataJournal, cluster: _Cluster) -> None:
        self._journal = journal
        self._cluster = cluster

    def write(self, change: Change) -> None:
        if self._journal.wants_snapshot():  # the state before this change: all the journal holds
            self._journal.write_snapshot(to_json(c) for c in state_changes(self._cluster))
        self._journal.append(to_json(change))

    def close(self) -> None:
        self._journal.close()


class DurableStore(MemoryStore):
    """MemoryStore whose lasting state is kept in ``directory`` (module docstring); ``start()``
    reads it, and refuses damage with one line (CorruptMetadata names the file and the byte)."""

    def __init__(self, directory: Path | str, cluster_id: str | None = None, *,
                 snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES, flush_messages: int = NEVER,
                 flush_ms: int = NEVER) -> None:
        super().__init__(cluster_id)
        self._cluster.lasting = True
        self.directory = Path(directory)
        self._wanted_cluster_id = cluster_id
        self._journal = MetadataJournal(self.directory, snapshot_bytes, flush_messages=flush_messages,
                                        flush_ms=flush_ms)
        # start() read no change (the directory had no metadata files, or only those a start wrote
        # before storing anything), or an adoption was left unfinished: log dirs beside it may be
        # an older kafkapy's to adopt.
        self.adopts = False
        self._adopting_marker = self.directory / ADOPTING_FILE

    def start(self) -> None:
        """Read the directory (once): the state as it was left."""
        c = self._cluster
        with self._lock:
            if self._closed:
                raise StoreError("the metadata store is closed")
            if c.sink is not None:
                return
            cluster_id, changes = self._journal.open(c.cluster_id, from_json)
            if self._wanted_cluster_id and cluster_id != self._wanted_cluster_id:
                self._journal.close()
                raise StoreError(f"cluster.id {self._wanted_cluster_id!r} does not match {cluster_id!r} "
                                 f"stored in {self.directory}")
            c.cluster_id = cluster_id
            self.adopts = not changes or self._adopting_marker.exists()
            for change in changes:
                apply_change(c, change)
            c.sink = _JournalSink(self._journal, c)
        log.info("metadata of cluster %s in %s: %d topics, %d changes read", cluster_id, self.directory,
                 len(c.topics), len(changes))

    def begin_adoption(self) -> None:
        """Before the first topic is adopted: a marker file, on disk before any of the topics, so a
        start after a kill in the middle adopts again (the topics already made are kept)."""
        try:
            self._adopting_marker.touch()
            fsync_directory(self.directory)  # an empty file: its directory entry is all there is
        except OSError as exc:
            raise StoreError(f"metadata.log.dir {self.directory}: {exc}") from None

    def end_adoption(self) -> None:
        """Every topic adopted: the marker goes, so a later start does not look again."""
        try:
            self._adopting_marker.unlink(missing_ok=True)
            fsync_directory(self.directory)
        except OSError as exc:  # the next start adopts again, which makes nothing twice
            log.warning("metadata.log.dir %s: %s", self.directory, exc)

    def _check_open(self) -> None:
        super()._check_open()
        if self._cluster.sink is None:
            raise StoreError(f"the metadata store over {self.directory} is not started (start() reads it)")
