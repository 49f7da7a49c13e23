"""A coordinator's own write meeting a failing log dir (KIP-112), as a Produce's does.

The group, transaction and share-state coordinators append to their internal topics' partitions
themselves. An OSError there is the partition's log failing: its dir goes offline (the same
``Partitions.storage_failed`` a Produce uses, so the failure is handled once), the request in
flight gets what Kafka's coordinator maps KAFKA_STORAGE_ERROR to (NOT_COORDINATOR: Kafka's
CoordinatorOperationExceptionHelper, GroupMetadataManager.appendGroupMetadataErrorToResponseError,
TransactionStateManager.appendTransactionToLog), the coordinator resigns the partition (every later
request for it NOT_COORDINATOR, FindCoordinator COORDINATOR_NOT_AVAILABLE while no other broker
leads it), and the coordinator's other partitions, in the dir still online, keep working.

The failure is a real one from the OS: the partition's active segment descriptor is replaced by
one of a directory opened read-only, so the append's write is refused (EBADF) and a read EISDIR.
"""

from __future__ import annotations

import errno
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.groups.offsets_log import OffsetsTopicLog
from kafkapy.groups.partitioning import OFFSETS_TOPIC, offsets_partition_for
from kafkapy.log.segments import FileLog, FileSegment
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC
from kafkapy.sharestate.state import coordinator_key, state_partition_for
from kafkapy.store import MemoryStore
from kafkapy.testing import wait_until
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC, transaction_partition_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_dataplane_wire import partitions_of

NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
STORAGE = ErrorCode.KAFKA_STORAGE_ERROR


def two_dirs(tmp_path: Path, **config: Any) -> tuple[dict[str, Any], Path, Path]:
    good, bad = tmp_path / "good", tmp_path / "bad"
    return {"broker.id": 1, "log.dirs": f"{good},{bad}", **config}, good, bad


def placed(broker: Broker, topic: str, keys: dict[int, str], good: Path, bad: Path) -> tuple[str, str]:
    """(the key whose partition of ``topic`` is in ``good``, the one in ``bad``): the least-loaded
    rule puts the topic's two partitions in one dir each."""
    logs = partitions_of(broker).logs
    where = {logs.dir_of(topic, p): key for p, key in keys.items()}
    assert set(where) == {good, bad}, f"{topic}'s partitions went to {set(where)}"
    return where[good], where[bad]


def break_log(broker: Broker, topic: str, partition: int, directory: Path) -> None:
    """The partition's active segment descriptor now names ``directory`` (read-only): the OS
    refuses the next append (EBADF) and read (EISDIR), as a dead disk would."""
    log = partitions_of(broker).logs.get(topic, partition)
    assert isinstance(log, FileLog)
    segment = log.segments[-1]
    assert isinstance(segment, FileSegment)
    directory_fd = os.open(directory, os.O_RDONLY)
    os.dup2(directory_fd, segment._fd)
    os.close(directory_fd)


def keys_by_partition(partition_of: Callable[[str], int], prefix: str) -> dict[int, str]:
    """A key for each of two partitions, by the coordinator's own hashing."""
    found: dict[int, str] = {}
    for i in range(1000):
        key = f"{prefix}-{i}"
        found.setdefault(partition_of(key), key)
        if len(found) == 2:
            return found
    raise AssertionError("no two keys in two partitions")


# --- the group coordinator: __consumer_offsets ------------------------------------------------------

def find(client: SimpleClient, key: str, key_type: int = CoordinatorKeyType.GROUP) -> int:
    code: int = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})["error_code"]
    return code


def commit(client: SimpleClient, group: str, offset: int) -> int:
    answer = client.request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    code: int = answer["topics"][0]["partitions"][0]["error_code"]
    return code


def fetched(client: SimpleClient, group: str) -> tuple[int, int]:
    """(the group's error, its committed offset of t-0) by OffsetFetch v7."""
    answer = client.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "require_stable": False,
                                                     "topics": [{"name": "t", "partition_indexes": [0]}]})
    offset: int = answer["topics"][0]["partitions"][0]["committed_offset"] if answer["topics"] else -1
    code: int = answer["error_code"]
    return code, offset


def test_an_offset_commit_the_disk_refuses_takes_the_dir_offline_and_resigns_the_partition(
        tmp_path: Path) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    config, good, bad = two_dirs(tmp_path, **{"offsets.topic.num.partitions": 2})
    groups = keys_by_partition(lambda g: offsets_partition_for(g, 2), "g")
    store = MemoryStore()
    with Broker(config, store=store) as broker:
        broker.seed({"t": {"partitions": 1, "records": [{"value": "v"}] * 3}})
        with SimpleClient(broker.bootstrap_servers) as client:
            for group in groups.values():
                wait_until(lambda g=group: find(client, g) == ErrorCode.NONE, what="a coordinator")
                assert commit(client, group, 1) == ErrorCode.NONE
            ok, failing = placed(broker, OFFSETS_TOPIC, groups, good, bad)
            failing_partition = offsets_partition_for(failing, 2)
            break_log(broker, OFFSETS_TOPIC, failing_partition, bad)

            # the request in flight: Kafka maps the append's KAFKA_STORAGE_ERROR to NOT_COORDINATOR
            assert commit(client, failing, 2) == NOT_COORDINATOR
            logs = partitions_of(broker).logs
            assert logs.offline_dirs == {bad}
            assert (OFFSETS_TOPIC, failing_partition) in logs.offline_partitions
            # resigned: its groups are not served from what the coordinator had loaded
            assert fetched(client, failing)[0] == NOT_COORDINATOR
            assert commit(client, failing, 3) == NOT_COORDINATOR
            assert find(client, failing) == ErrorCode.COORDINATOR_NOT_AVAILABLE
            # the other partition, in the good dir, goes on
            assert find(client, ok) == ErrorCode.NONE
            assert commit(client, ok, 2) == ErrorCode.NONE
            assert fetched(client, ok) == (ErrorCode.NONE, 2)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=ok,
                                 enable_auto_commit=False, api_version=(2, 5))
        try:
            consumer.assign([TopicPartition("t", 0)])
            assert consumer.committed(TopicPartition("t", 0)) == 2
            consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(3, "")})
            assert consumer.committed(TopicPartition("t", 0)) == 3
        finally:
            consumer.close()
    with Broker(config, store=store) as again, SimpleClient(again.bootstrap_servers) as client:
        # the dir is back after a restart: what was committed before the failure is there
        wait_until(lambda: find(client, failing) == ErrorCode.NONE, what="the coordinator back")
        wait_until(lambda: fetched(client, failing) == (ErrorCode.NONE, 1), what="the group loaded")
        assert fetched(client, ok) == (ErrorCode.NONE, 3)


def test_a_replay_the_disk_refuses_fails_the_dir_and_is_not_coordinator() -> None:
    """A load's read (the group module loads what it leads as soon as it leads it, so a real
    failure there cannot be timed from outside: this one is the log's) goes the same way."""
    failed: list[tuple[str, int, OSError]] = []

    class Unreadable:
        log_start_offset, high_watermark = 0, 10

        def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> Any:
            raise OSError(errno.EIO, "Input/output error")

    class Logs:
        def leader_log(self, topic: str, partition: int) -> Any:
            return Unreadable()

        def storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
            failed.append((topic, partition, exc))
            return KafkaApiError(STORAGE, f"{topic}-{partition} is in an offline log dir")

    with pytest.raises(KafkaApiError) as refused:
        list(OffsetsTopicLog(Logs(), 2).replay(1))
    assert refused.value.code == NOT_COORDINATOR
    assert [(t, p, exc.errno) for t, p, exc in failed] == [(OFFSETS_TOPIC, 1, errno.EIO)]


# --- the transaction coordinator: __transaction_state -----------------------------------------------

def init_producer(client: SimpleClient, transactional_id: str) -> tuple[int, int]:
    """(error, producer epoch) of InitProducerId v4 for ``transactional_id``."""
    answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": transactional_id, "transaction_timeout_ms": 60000,
        "producer_id": -1, "producer_epoch": -1})
    return answer["error_code"], answer["producer_epoch"]


def test_a_transaction_state_write_the_disk_refuses_is_not_coordinator_and_the_dir_goes_offline(
        tmp_path: Path) -> None:
    config, good, bad = two_dirs(tmp_path, **{"transaction.state.log.num.partitions": 2})
    ids = keys_by_partition(lambda t: transaction_partition_for(t, 2), "txn")
    with Broker(config) as broker, SimpleClient(broker.bootstrap_servers) as client:
        for transactional_id in ids.values():
            wait_until(lambda t=transactional_id: find(client, t, CoordinatorKeyType.TRANSACTION)
                       == ErrorCode.NONE, what="a coordinator")
            assert init_producer(client, transactional_id) == (ErrorCode.NONE, 0)
        ok, failing = placed(broker, TRANSACTION_STATE_TOPIC, ids, good, bad)
        failing_partition = transaction_partition_for(failing, 2)
        break_log(broker, TRANSACTION_STATE_TOPIC, failing_partition, bad)

        assert init_producer(client, failing)[0] == NOT_COORDINATOR  # the epoch bump's write
        logs = partitions_of(broker).logs
        assert logs.offline_dirs == {bad}
        assert (TRANSACTION_STATE_TOPIC, failing_partition) in logs.offline_partitions
        assert init_producer(client, failing)[0] == NOT_COORDINATOR  # resigned
        assert find(client, failing, CoordinatorKeyType.TRANSACTION) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert find(client, ok, CoordinatorKeyType.TRANSACTION) == ErrorCode.NONE
        assert init_producer(client, ok) == (ErrorCode.NONE, 1)
        listed = client.request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
        assert [t["transactional_id"] for t in listed["transaction_states"]] == [ok]
        # a real transactional producer whose id is in the partition still online
        confluent = pytest.importorskip("confluent_kafka")
        broker.seed({"out": {"partitions": 1, "records": []}})
        producer = confluent.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": ok})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("out", b"in a transaction")
        producer.commit_transaction(10)
        committed = broker.records("out", 0, isolation="read_committed")
        assert [r.value for r in committed] == [b"in a transaction"]


def test_a_transaction_state_load_the_disk_refuses_is_not_coordinator(tmp_path: Path) -> None:
    config, good, bad = two_dirs(tmp_path, **{"transaction.state.log.num.partitions": 2})
    ids = keys_by_partition(lambda t: transaction_partition_for(t, 2), "txn")
    store = MemoryStore()
    with Broker(config, store=store) as broker, SimpleClient(broker.bootstrap_servers) as client:
        for transactional_id in ids.values():
            wait_until(lambda t=transactional_id: find(client, t, CoordinatorKeyType.TRANSACTION)
                       == ErrorCode.NONE, what="a coordinator")
            assert init_producer(client, transactional_id) == (ErrorCode.NONE, 0)
        ok, failing = placed(broker, TRANSACTION_STATE_TOPIC, ids, good, bad)
    with Broker(config, store=store) as again, SimpleClient(again.bootstrap_servers) as client:
        wait_until(lambda: again.runtime is not None
                   and TRANSACTION_STATE_TOPIC in again.runtime.cluster.topics, what="the state topic")
        break_log(again, TRANSACTION_STATE_TOPIC, transaction_partition_for(failing, 2), bad)
        assert init_producer(client, failing)[0] == NOT_COORDINATOR  # its load's read is refused
        assert partitions_of(again).logs.offline_dirs == {bad}
        assert find(client, failing, CoordinatorKeyType.TRANSACTION) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert init_producer(client, ok) == (ErrorCode.NONE, 1)


# --- the share coordinator: __share_group_state -----------------------------------------------------

def share_write(client: SimpleClient, group: str, topic_id: uuid.UUID, partition: int, start: int) -> int:
    answer = client.request(ApiKey.WRITE_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": partition, "state_epoch": 0, "leader_epoch": 0,
                                               "start_offset": start, "state_batches": []}]}]})
    code: int = answer["results"][0]["partitions"][0]["error_code"]
    return code


def share_init(client: SimpleClient, group: str, topic_id: uuid.UUID, partition: int) -> int:
    answer = client.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": partition, "state_epoch": 0,
                                               "start_offset": 0}]}]})
    code: int = answer["results"][0]["partitions"][0]["error_code"]
    return code


def find_share(client: SimpleClient, key: str) -> int:
    answer = client.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": CoordinatorKeyType.SHARE,
                                                         "coordinator_keys": [key]})
    code: int = answer["coordinators"][0]["error_code"]
    return code


@pytest.fixture
def share_broker(tmp_path: Path) -> Iterator[tuple[Broker, Path, Path]]:
    config, good, bad = two_dirs(tmp_path, **{"share.coordinator.state.topic.num.partitions": 2})
    with Broker(config) as broker:
        yield broker, good, bad


def test_a_share_state_write_the_disk_refuses_is_not_coordinator_and_the_dir_goes_offline(
        share_broker: tuple[Broker, Path, Path]) -> None:
    broker, good, bad = share_broker
    broker.seed({"q": {"partitions": 8, "records": []}})
    assert broker.runtime is not None
    topic_id = broker.runtime.cluster.topics["q"].topic_id
    by_state_partition: dict[int, int] = {}
    for p in range(8):
        by_state_partition.setdefault(state_partition_for(("workers", topic_id, p), 2), p)
    assert len(by_state_partition) == 2
    keys = {state: coordinator_key(("workers", topic_id, p)) for state, p in by_state_partition.items()}
    with SimpleClient(broker.bootstrap_servers) as client:
        for state, key in keys.items():
            wait_until(lambda k=key: find_share(client, k) == ErrorCode.NONE, what="a share coordinator")
            assert share_init(client, "workers", topic_id, by_state_partition[state]) == ErrorCode.NONE
        ok_key, failing_key = placed(broker, SHARE_STATE_TOPIC, keys, good, bad)
        [failing_state] = [s for s, k in keys.items() if k == failing_key]
        [ok_state] = [s for s, k in keys.items() if k == ok_key]
        failing_p, ok_p = by_state_partition[failing_state], by_state_partition[ok_state]
        break_log(broker, SHARE_STATE_TOPIC, failing_state, bad)

        assert share_write(client, "workers", topic_id, failing_p, 5) == NOT_COORDINATOR
        logs = partitions_of(broker).logs
        assert logs.offline_dirs == {bad}
        assert (SHARE_STATE_TOPIC, failing_state) in logs.offline_partitions
        assert share_write(client, "workers", topic_id, failing_p, 6) == NOT_COORDINATOR  # resigned
        assert find_share(client, failing_key) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert find_share(client, ok_key) == ErrorCode.NONE
        assert share_write(client, "workers", topic_id, ok_p, 5) == ErrorCode.NONE
