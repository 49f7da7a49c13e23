"""`kafkapy serve` with log.dirs and no ZooKeeper keeps its metadata across restarts, clean or killed.

Kafka in KRaft mode keeps its metadata in the metadata log under metadata.log.dir (the first of
log.dirs), so a restart loses nothing it acknowledged; kafkapy's durable store
(kafkapy.store.durable) makes the same promise. A `kafkapy serve` (its store in its log dir)
gets a topic with a config, a SCRAM user, an ACL, a client quota,
records from an idempotent producer and a group's committed offset; then it is stopped with SIGTERM
and started again, and killed with SIGKILL and started again, and each time everything is there:
the records read back, a new producer id is above every one handed out before, and no partition's
leader epoch went back. Real clients throughout: confluent-kafka, and kafkapy's blocking client
for the requests confluent-kafka does not send (client quotas, InitProducerId, Metadata's epochs).

The child imports this checkout's kafkapy (PYTHONPATH), not the one the venv's editable install
points at.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kafkapy.client import SimpleClient
from kafkapy.protocol.api_keys import ApiKey

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on PLAINTEXT://127\.0\.0\.1:(\d+)")
TIMEOUT_S = 30
TOPIC, GROUP, RECORDS = "orders", "billing", 10
ALICE_READS = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)


class Serve:
    """`kafkapy serve` over ``log_dir``, its stderr read on a thread."""

    def __init__(self, log_dir: Path, *overrides: str) -> None:
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkapy.cli", "serve",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={log_dir}",
             "--override", "authorizer.class.name=acl", "--override", "super.users=User:ANONYMOUS",
             *(arg for override in overrides for arg in ("--override", override))],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        self.stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            for line in self.proc.stderr:
                self.stderr.append(line)
                self._lines.put(line)
        self._lines.put(None)

    def bootstrap(self) -> str:
        """The broker's address, once it listens."""
        ports: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not ports:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail("kafkapy serve did not listen:\n" + "".join(self.stderr))
            if line is None:
                pytest.fail(f"kafkapy serve exited ({self.proc.wait()}):\n" + "".join(self.stderr))
            if (found := LISTENING.search(line)) is not None:
                ports.append(found.group(1))
        return f"127.0.0.1:{ports[0]}"

    def wait_for(self, pattern: str) -> bool:
        """Whether a stderr line matching ``pattern`` comes before the process ends or the timeout."""
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                return False
            if line is None:
                return False
            if re.search(pattern, line):
                return True
        return False

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=TIMEOUT_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT_S)


def _quota_entity() -> list[dict[str, Any]]:
    return [{"entity_type": "client-id", "entity_name": "reporting"}]


def _make_everything(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1, config={"retention.ms": "3600000"})]).values():
        future.result(TIMEOUT_S)
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret")]).values():
        future.result(TIMEOUT_S)
    for future in admin.create_acls([ALICE_READS], request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)
    with SimpleClient(bootstrap) as client:
        altered = client.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": _quota_entity(),
            "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}],
            "validate_only": False})
    assert [entry.error_code for entry in altered.entries] == [0]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for index in range(RECORDS):
        producer.produce(TOPIC, f"order-{index}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 7)], asynchronous=False)
    finally:
        consumer.close()


def _new_producer_id(bootstrap: str) -> int:
    with SimpleClient(bootstrap) as client:
        answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                             "transaction_timeout_ms": 60000,
                                                             "producer_id": -1, "producer_epoch": -1})
    assert answer.error_code == 0
    return int(answer.producer_id)


def _leader_epochs(bootstrap: str) -> dict[int, int]:
    with SimpleClient(bootstrap) as client:
        answer = client.request(ApiKey.METADATA, 9, {"topics": [{"name": TOPIC}],
                                                     "allow_auto_topic_creation": False,
                                                     "include_cluster_authorized_operations": False,
                                                     "include_topic_authorized_operations": False})
    (topic,) = answer.topics
    assert topic.error_code == 0, topic
    return {p.partition_index: p.leader_epoch for p in topic.partitions}


def _read_all(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def _check_everything(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    assert TOPIC in topics and len(topics[TOPIC].partitions) == 2
    (configs,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, TOPIC)]).values()
    assert configs.result(TIMEOUT_S)["retention.ms"].value == "3600000"
    (described,) = admin.describe_user_scram_credentials(["alice"]).values()
    assert [(i.mechanism, i.iterations) for i in described.result(TIMEOUT_S).scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 4096)]
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(everything).result(TIMEOUT_S) == [ALICE_READS]
    with SimpleClient(bootstrap) as client:
        quotas = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    assert [([(e.entity_type, e.entity_name) for e in entry.entity],
             [(v.key, v.value) for v in entry["values"]]) for entry in quotas.entries] == \
        [([("client-id", "reporting")], [("producer_byte_rate", 1048576.0)])]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        (committed,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=TIMEOUT_S)
    finally:
        consumer.close()
    assert committed.offset == 7
    assert _read_all(bootstrap) == [f"order-{index}".encode() for index in range(RECORDS)]


def test_serve_keeps_its_metadata_across_a_clean_stop_and_a_kill(tmp_path: Path) -> None:
    served = Serve(tmp_path)
    try:
        bootstrap = served.bootstrap()
        _make_everything(bootstrap)
        producer_ids = [_new_producer_id(bootstrap)]
        epochs = _leader_epochs(bootstrap)
        assert served.stop(signal.SIGTERM) == 0
        for stop in (signal.SIGKILL, signal.SIGTERM):
            served = Serve(tmp_path)
            bootstrap = served.bootstrap()
            _check_everything(bootstrap)
            producer_ids.append(_new_producer_id(bootstrap))
            assert producer_ids[-1] > max(producer_ids[:-1]), producer_ids  # never handed out twice
            now = _leader_epochs(bootstrap)
            assert all(now[p] >= epochs[p] for p in epochs), (epochs, now)
            epochs = now
            assert served.stop(stop) == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
    finally:
        served.kill()
    # The metadata is in the first log dir, in files no log loader takes for a partition.
    assert {p.name for p in tmp_path.iterdir() if p.is_file()} >= {"kafkapy-metadata.journal",
                                                                   "kafkapy-metadata.snapshot"}


def test_serve_refuses_a_damaged_journal_in_one_line(tmp_path: Path) -> None:
    served = Serve(tmp_path)
    try:
        _make_everything(served.bootstrap())
        assert served.stop(signal.SIGTERM) == 0
    finally:
        served.kill()
    journal = tmp_path / "kafkapy-metadata.journal"
    data = bytearray(journal.read_bytes())
    data[20] ^= 0x01  # inside the first entry's JSON: its checksum no longer holds, and entries follow
    journal.write_bytes(bytes(data))
    served = Serve(tmp_path)
    try:
        assert served.proc.wait(timeout=TIMEOUT_S) == 2
    finally:
        served.kill()
    time.sleep(0.2)  # the reader thread's last lines
    assert served.stderr == [f"kafkapy serve: error: {journal}: the entry at byte 0 is corrupt and entries "
                             "follow it (a crash tears only the last): the journal was damaged\n"]
