"""CRC-32C's zero-copy path (google-crc32c's C function on a writable buffer, in place) held equal
to its plain path (the bytes entry point, copying), on every kind of buffer either takes."""

from __future__ import annotations

import google_crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import crc32c as crc_module
from kafkapy.protocol.crc32c import ZERO_COPY_MIN, crc32c, crc32c_copying
from kafkapy.protocol.records import crc32c as exported


def test_the_c_function_is_found_here() -> None:
    # The zero-copy path is what the Produce path relies on for large batches: if the symbol
    # stopped being found, every large batch would silently pay a copy again.
    assert crc_module._extend is not None


def test_records_exports_the_same_function() -> None:
    assert exported is crc32c


def test_the_check_value() -> None:
    assert crc32c(b"123456789") == crc32c(bytearray(b"123456789")) == 0xE3069283


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=0, max_size=3 * ZERO_COPY_MIN), start=st.integers(0, 64),
       cut=st.integers(0, 64))
def test_every_kind_of_buffer_gives_the_bytes_entry_points_crc(data: bytes, start: int, cut: int) -> None:
    expected = int(google_crc32c.value(data))
    writable = bytearray(data)
    assert crc32c(data) == crc32c(writable) == crc32c(memoryview(writable)) == expected
    assert crc32c(memoryview(data)) == crc32c_copying(memoryview(writable)) == expected
    stop = max(start, len(data) - cut)
    part = int(google_crc32c.value(data[start:stop]))
    assert crc32c(memoryview(writable)[start:stop]) == crc32c(memoryview(data)[start:stop]) == part


def test_large_writable_buffers_are_read_in_place_and_released() -> None:
    data = bytearray(range(256)) * (4 * ZERO_COPY_MIN // 256)
    assert crc32c(data) == int(google_crc32c.value(bytes(data)))
    del data[-10:]  # no export left behind: the bytearray can still be resized
    assert crc32c(memoryview(data)[7:]) == int(google_crc32c.value(bytes(data[7:])))
