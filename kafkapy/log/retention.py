"""Which old segments retention deletes: Kafka's UnifiedLog.deletableSegments, as a pure function.

Retention removes whole segments, oldest first, and stops at the first that
must stay. The active segment counts too, as in Kafka: when every segment may
go, the log rolls a new empty active segment first and then deletes them all,
so the log start offset reaches the log end offset. A segment stays when an
offset in it is at or past the high watermark (its upper bound, the next
segment's base offset or the log end, is above it), and an empty active segment
always stays. Three reasons, the last two only with ``cleanup.policy``
containing ``delete``:

- the log start offset (DeleteRecords) passed the next segment's base offset;
- ``retention.bytes``: dropping the segment still leaves at least that much;
- ``retention.ms``: the segment's largest timestamp is older than that.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kafkapy.log.topic_config import LogConfig

__all__ = ["SegmentFacts", "deletable_segments"]


@attrs.frozen
class SegmentFacts:
    """What retention needs to know of a segment."""

    base_offset: int
    size: int
    largest_timestamp: int  # the max batch timestamp, or the last write without timestamps


def deletable_segments(
    segments: Sequence[SegmentFacts],
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
    log_end_offset: int,
) -> int:
    """How many of the oldest segments to delete; all of them means roll first (the caller does)."""
    remaining = sum(segment.size for segment in segments)
    count = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = following.base_offset if following is not None else log_end_offset
        if upper_bound > high_watermark or (following is None and segment.size == 0):
            break
        start_breached = following is not None and following.base_offset <= log_start_offset
        size_breached = (
            config.deletes
            and config.retention_bytes >= 0
            and remaining - segment.size >= config.retention_bytes
        )
        time_breached = (
            config.deletes
            and config.retention_ms >= 0
            and now_ms - segment.largest_timestamp > config.retention_ms
        )
        if not (start_breached or size_breached or time_breached):
            break
        remaining -= segment.size
        count += 1
    return count
