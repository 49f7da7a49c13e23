"""survey_log_dirs: the partition directories a broker's log dirs hold, as the log loading sees them."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from storage_helpers import batch_at

from kafkapy.log.manager import LogManager, MetaPropertiesMismatch
from kafkapy.log.moves import delete_dir_name, future_dir_name
from kafkapy.log.partition_metadata import PARTITION_METADATA
from kafkapy.log.survey import survey_log_dirs


def write_logs(log_dir: Path, broker_id: int, partitions: dict[tuple[str, int], uuid.UUID | None],
               records: int = 3) -> None:
    """Partition directories written by kafkapy's log code, as a broker leaves them."""
    logs = LogManager([log_dir], broker_id=broker_id)
    for (topic, partition), topic_id in partitions.items():
        log = logs.get_or_create(topic, partition, topic_id=topic_id)
        for _ in range(records):
            log.append(batch_at(log, 2))
    logs.close()


def test_the_survey_finds_what_the_log_loading_makes_a_log_of(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    orders = uuid.uuid4()
    write_logs(a, 1, {("orders", 0): orders, ("my-topic-1", 2): None})
    write_logs(b, 1, {("orders", 1): orders})
    (a / delete_dir_name("orders", 5)).mkdir()  # a finished move's or deleted topic's leftover
    (a / "orders-6.0123456789abcdef0123456789abcdef-stray").mkdir()  # Kafka's stray log
    (a / "not_a_partition").mkdir()
    (b / "orders-7").write_text("a file, not a directory")
    orphan = b / future_dir_name("orders", 3)  # a move's copy whose current log is gone
    orphan.mkdir()
    (a / future_dir_name("orders", 0)).mkdir()  # beside its current log: the same partition
    survey = survey_log_dirs([a, b, tmp_path / "not-made-yet"], 1, None)
    assert survey.left == []
    assert [(f.topic, f.partition, f.topic_id, f.directory) for f in survey.partitions] == [
        ("my-topic-1", 2, None, a / "my-topic-1-2"),
        ("orders", 0, orders, a / "orders-0"),
        ("orders", 1, orders, b / "orders-1"),
        ("orders", 3, None, orphan),
    ]
    sizes = {(f.topic, f.partition): f.log_bytes for f in survey.partitions}
    assert sizes[("orders", 0)] == (a / "orders-0" / "00000000000000000000.log").stat().st_size > 0
    assert sizes[("orders", 3)] == 0


def test_an_unreadable_partition_metadata_is_left_with_its_reason(tmp_path: Path) -> None:
    write_logs(tmp_path, 1, {("orders", 0): uuid.uuid4(), ("orders", 1): uuid.uuid4()})
    (tmp_path / "orders-1" / PARTITION_METADATA).write_text("version: 0\n")
    survey = survey_log_dirs([tmp_path], 1, None)
    assert [(f.topic, f.partition) for f in survey.partitions] == [("orders", 0)]
    assert survey.left == [f"{tmp_path / 'orders-1'}: {tmp_path / 'orders-1' / PARTITION_METADATA}: "
                           f"expected a version line and a topic_id line"]


def test_a_log_dir_of_another_broker_or_cluster_is_refused_as_the_log_loading_refuses_it(
        tmp_path: Path) -> None:
    LogManager([tmp_path], broker_id=1, cluster_id="first").close()
    with pytest.raises(MetaPropertiesMismatch, match="is broker 1's, not 2's"):
        survey_log_dirs([tmp_path], 2, None)
    with pytest.raises(MetaPropertiesMismatch, match="is cluster first's, not second's"):
        survey_log_dirs([tmp_path], 1, "second")
    assert survey_log_dirs([tmp_path], 1, "first").partitions == []
