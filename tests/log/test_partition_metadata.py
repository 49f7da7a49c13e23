"""partition.metadata (KIP-516): written as Kafka's PartitionMetadataFile writes it, read back on
open, a log holding another topic id refused (InconsistentTopicIdException), and any malformed
file a one-line CheckpointCorrupt, never a traceback from the parser."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.log import LogManager
from kafkapy.log.checkpoint import CheckpointCorrupt
from kafkapy.log.manager import AllLogDirsFailed
from kafkapy.log.partition_metadata import (
    PARTITION_METADATA,
    InconsistentTopicId,
    read_partition_metadata,
)

TOPIC_ID = uuid.UUID(int=1)  # Kafka prints it AAAAAAAAAAAAAAAAAAAAAQ
OTHER_ID = uuid.UUID("6f1a5e0c-4b8a-4c2e-9a43-0d3f5c1e2b7a")


def test_a_new_log_writes_kafkas_bytes(tmp_path: Path) -> None:
    logs = LogManager([tmp_path])
    logs.get_or_create("t", 0, topic_id=TOPIC_ID)
    logs.get_or_create("t", 1)  # no topic id known: no file, as Kafka without one
    logs.close()
    # PartitionMetadata.encode: two lines, no newline after the last
    written = (tmp_path / "t-0" / PARTITION_METADATA).read_bytes()
    assert written == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert not (tmp_path / "t-1" / PARTITION_METADATA).exists()
    assert not list(tmp_path.glob("t-0/*.tmp"))


def test_the_topic_id_is_read_back_and_a_known_log_takes_one_later(tmp_path: Path) -> None:
    logs = LogManager([tmp_path])
    logs.get_or_create("t", 0, topic_id=TOPIC_ID)
    logs.get_or_create("t", 1)
    logs.close()
    again = LogManager([tmp_path])
    try:
        assert again.logs[("t", 0)].topic_id == TOPIC_ID
        assert again.logs[("t", 1)].topic_id is None
        again.get_or_create("t", 1, topic_id=OTHER_ID)  # Kafka's assignTopicId: none yet, so record it
        assert read_partition_metadata(tmp_path / "t-1") == OTHER_ID
        assert again.get_or_create("t", 0, topic_id=TOPIC_ID).topic_id == TOPIC_ID
    finally:
        again.close()


def test_a_log_of_another_topic_id_is_refused_with_kafkas_message(tmp_path: Path) -> None:
    logs = LogManager([tmp_path])
    log = logs.get_or_create("t", 0, topic_id=TOPIC_ID)
    with pytest.raises(InconsistentTopicId) as refused:
        logs.get_or_create("t", 0, topic_id=OTHER_ID)
    assert str(refused.value) == (
        "Tried to assign topic ID bxpeDEuKTC6aQw0_XB4reg to log for topic partition t-0,"
        "but log already contained topic ID AAAAAAAAAAAAAAAAAAAAAQ")
    assert "\n" not in str(refused.value)
    assert log.topic_id == TOPIC_ID and read_partition_metadata(tmp_path / "t-0") == TOPIC_ID
    logs.close()


def test_without_lasting_topic_ids_the_log_takes_the_new_one(tmp_path: Path) -> None:
    """An in-memory metadata store makes a topic again on restart with a new id: the log on disk
    follows it (kafkapy's rule; Kafka's metadata always outlives the broker)."""
    logs = LogManager([tmp_path], lasting_topic_ids=False)
    logs.get_or_create("t", 0, topic_id=TOPIC_ID)
    assert logs.get_or_create("t", 0, topic_id=OTHER_ID).topic_id == OTHER_ID
    assert read_partition_metadata(tmp_path / "t-0") == OTHER_ID
    logs.close()


@pytest.mark.parametrize("content", [
    b"", b"version: 0\n", b"version 0 x\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
    b"version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
    b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", b"version: 0\ntopic_id: not-a-uuid!",
    b"version: 0\ntopic_id AAAAAAAAAAAAAAAAAAAAAQ extra", b"\xff\xfe",
], ids=["empty", "one-line", "bad-version-line", "old-version", "zero-uuid", "bad-uuid", "bad-id-line",
        "not-text"])
def test_a_malformed_file_is_one_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / PARTITION_METADATA).write_bytes(content)
    with pytest.raises(AllLogDirsFailed) as refused:  # the one log dir failed: the broker stops
        LogManager([tmp_path])
    assert str(refused.value).startswith(f"Shutdown broker because all log dirs in {tmp_path} have failed")
    assert f"({tmp_path / 't-0' / PARTITION_METADATA}: " in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_later_version_is_read_as_kafka_reads_it(tmp_path: Path) -> None:
    (tmp_path / PARTITION_METADATA).write_text("version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
    assert read_partition_metadata(tmp_path) == TOPIC_ID  # "version >= CURRENT_VERSION" is accepted


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=80), st.text(max_size=80).map(str.encode),
                 st.from_regex(r"version:\s[-0-9]{1,3}\ntopic_id:\s[A-Za-z0-9_=-]{0,30}\n?", fullmatch=True)
                 .map(str.encode)))
def test_fuzz_reading_never_raises_anything_else(content: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory)
        (path / PARTITION_METADATA).write_bytes(content)
        try:
            found = read_partition_metadata(path)
        except CheckpointCorrupt:
            return
        assert isinstance(found, uuid.UUID) and found.int != 0
