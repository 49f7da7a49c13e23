"""share.auto.offset.reset's strategies (kafkapy.groups.offset_reset) as Kafka's
ShareGroupAutoOffsetResetStrategy reads them: java.time.Duration's text after ``by_duration:``."""

from __future__ import annotations

import pytest

from kafkapy.groups.offset_reset import BY_DURATION, EARLIEST, LATEST, OffsetReset, parse_share_offset_reset

HOUR_NS = 3_600 * 10**9


@pytest.mark.parametrize(("text", "expected"), [
    ("earliest", OffsetReset(EARLIEST)),
    ("latest", OffsetReset(LATEST)),
    ("by_duration:PT1H", OffsetReset(BY_DURATION, HOUR_NS)),
    ("by_duration:pt1h", OffsetReset(BY_DURATION, HOUR_NS)),  # Duration.parse ignores case
    ("by_duration:P1DT2H3M4.5S", OffsetReset(BY_DURATION, 86_400 * 10**9 + 2 * HOUR_NS + 184_500_000_000)),
    ("by_duration:PT0S", OffsetReset(BY_DURATION, 0)),
    ("by_duration:P-1DT25H", OffsetReset(BY_DURATION, HOUR_NS)),  # parts signed, the total counts
    ("by_duration:-PT-1H", OffsetReset(BY_DURATION, HOUR_NS)),
    ("by_duration:PT1,25S", OffsetReset(BY_DURATION, 1_250_000_000)),
])
def test_what_kafka_takes(text: str, expected: OffsetReset) -> None:
    assert parse_share_offset_reset(text) == expected


@pytest.mark.parametrize(("text", "reason"), [
    ("none", "Unknown auto offset reset strategy"),  # a consumer group's, not a share group's
    ("EARLIEST", "Unknown auto offset reset strategy"),
    ("by_duration", "<:duration> part is missing"),
    ("by_duration:1h", "Unable to parse duration"),
    ("by_duration:P", "Unable to parse duration"),
    ("by_duration:PT", "Unable to parse duration"),
    ("by_duration:PT1.0000000001S", "Unable to parse duration"),  # nine decimals at most
    ("by_duration:-PT1H", "Negative duration is not supported"),
    ("by_duration:PT-0.5S", "Negative duration is not supported"),
])
def test_what_kafka_refuses(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_share_offset_reset(text)


def test_the_timestamp_is_now_less_the_duration_floored_to_milliseconds() -> None:
    assert OffsetReset(BY_DURATION, HOUR_NS).timestamp_ms(10_000_000) == 10_000_000 - 3_600_000
    assert OffsetReset(BY_DURATION, 1).timestamp_ms(1000) == 999  # Instant.toEpochMilli floors
