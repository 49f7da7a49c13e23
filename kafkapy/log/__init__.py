"""Partition logs: where a broker keeps the record batches of each partition.

Sans-server (the store layer): imports kafkapy.errors, kafkapy.protocol and the
standard library only. ``MemoryLog`` is the default backend, ``FileLog`` keeps
Kafka's on-disk layout under ``log.dirs``; ``LogManager`` owns a broker's logs.
See docs/log.md.
"""

from kafkapy.log.base import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendInfo,
    EpochEndOffset,
    OffsetOutOfRange,
    PartitionLog,
    ReadResult,
    TimestampAndOffset,
)
from kafkapy.log.manager import LogDirDescription, LogManager
from kafkapy.log.memory import MemoryLog
from kafkapy.log.segments import FileLog
from kafkapy.log.topic_config import LogConfig

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_PENDING_UPLOAD_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "EpochEndOffset",
    "FileLog",
    "LogConfig",
    "LogDirDescription",
    "LogManager",
    "MemoryLog",
    "OffsetOutOfRange",
    "PartitionLog",
    "ReadResult",
    "TimestampAndOffset",
]
