"""What partitions a broker's log dirs hold, read without opening a log.

A broker adopting log dirs written before its metadata was kept (kafkapy.server.adoption) needs
each partition directory's topic, partition, topic id and how much it holds, before the data
plane opens the logs (opening recovers them: too much work to do twice). The directories counted
are those the log loading (kafkapy.log.manager) makes a log of: ``<topic>-<partition>``, and a
``-future`` one with no current directory beside it, which the loading makes the current log.
``-delete`` directories (deleted at load), Kafka's ``-stray`` ones and files are not partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import attrs

from kafkapy.log.checkpoint import CheckpointCorrupt
from kafkapy.log.manager import check_meta_properties, parse_partition_dir
from kafkapy.log.moves import FUTURE_SUFFIX, parse_moved_dir
from kafkapy.log.partition_metadata import read_partition_metadata

__all__ = ["FoundPartition", "LogDirSurvey", "survey_log_dirs"]

LOG_FILE_SUFFIX = ".log"  # a segment's records (Kafka's LogFileUtils.LOG_FILE_SUFFIX)


@attrs.frozen
class FoundPartition:
    topic: str
    partition: int
    topic_id: uuid.UUID | None  # None: no partition.metadata (a log written before KIP-516's ids)
    log_bytes: int  # its segments' records: which broker's copy holds the most
    directory: Path


@attrs.frozen
class LogDirSurvey:
    """The partitions found, and each directory left out with the reason (one line each)."""

    partitions: list[FoundPartition]
    left: list[str]


def survey_log_dirs(log_dirs: Sequence[Path | str], broker_id: int, cluster_id: str | None) -> LogDirSurvey:
    """The partition directories of one broker's ``log_dirs``. A dir whose meta.properties names
    another broker or cluster is MetaPropertiesMismatch, as the log loading refuses it; a dir that
    cannot be listed, or a partition.metadata that cannot be read, is left (the log loading takes
    that dir offline)."""
    current: dict[tuple[str, int], FoundPartition] = {}
    futures: dict[tuple[str, int], FoundPartition] = {}
    left: list[str] = []
    for log_dir in map(Path, log_dirs):
        try:
            check_meta_properties(log_dir, broker_id, cluster_id)
            children = sorted(child for child in log_dir.iterdir() if child.is_dir())
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            left.append(f"{log_dir}: {exc}")
            continue
        for child in children:
            key = parse_partition_dir(child.name)
            into = current
            if key is None:
                moved = parse_moved_dir(child.name)
                if moved is None or moved[2] != FUTURE_SUFFIX:
                    continue
                key, into = (moved[0], moved[1]), futures
            try:
                into[key] = FoundPartition(key[0], key[1], read_partition_metadata(child),
                                           _log_bytes(child), child)
            except (OSError, CheckpointCorrupt) as exc:
                left.append(f"{child}: {exc}")
    orphans = [found for key, found in futures.items() if key not in current]
    return LogDirSurvey(sorted([*current.values(), *orphans], key=lambda f: (f.topic, f.partition)), left)


def _log_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir() if path.name.endswith(LOG_FILE_SUFFIX))
