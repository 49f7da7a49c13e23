"""The group -> __consumer_offsets partition rule agrees with Java's String.hashCode."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.groups.partitioning import java_string_hash, offsets_partition_for


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),                 # Java: "hello".hashCode()
    ("my-group", -1906497762),           # wraps negative at 32 bits
    ("polygenelubricants", -2147483648),  # the classic hashCode() == Integer.MIN_VALUE
    ("\U0001F600", 1772899),             # a surrogate pair counts as two code units
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_min_value_maps_to_partition_zero() -> None:
    assert offsets_partition_for("polygenelubricants", 50) == 0


def test_partition_of_a_known_group() -> None:
    assert offsets_partition_for("hello", 50) == 99162322 % 50


@given(st.text(), st.integers(min_value=1, max_value=1000))
def test_partition_in_range(group: str, partitions: int) -> None:
    assert 0 <= offsets_partition_for(group, partitions) < partitions


def test_zero_partitions_rejected() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        offsets_partition_for("g", 0)
