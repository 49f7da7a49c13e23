"""kafkapy/commands/_partitions.py: reading a Fetch answer's records (a model-based property), and
how the commands behave against a kafkapy broker that does not serve the record APIs yet."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.commands._partitions import fetched_partition
from kafkapy.protocol.records import Records, build_record_batch

# A batch: (records in it, gap before it, is a control batch)
batch_specs = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3), st.booleans()), max_size=6)


@given(batch_specs, st.integers(0, 30), st.integers(0, 40))
def test_read_keeps_data_records_from_the_position(specs: list[tuple[int, int, bool]], position: int,
                                                   cut: int) -> None:
    """Model: the data records at or after ``position`` of every whole batch, in order; the next
    position is past the last whole batch (control ones included), never behind ``position``."""
    raw, expected, ends, offset = b"", [], [position], 0
    for count, gap, control in specs:
        offset += gap
        batch = build_record_batch([(None, b"%d" % (offset + i)) for i in range(count)], base_offset=offset,
                                   is_control=control)
        raw += batch
        if not control:
            expected += [offset + i for i in range(count) if offset + i >= position]
        offset += count
        ends.append(offset)
    if specs and cut:  # a partial last batch, as a Fetch cut at max_bytes sends
        raw = raw[:-cut]
        last_count, _, last_control = specs[-1]
        last_base = offset - last_count
        if not last_control:
            expected = [o for o in expected if o < last_base]
        ends.pop()
    fetched = fetched_partition(Records(raw), position, high_watermark=offset)
    assert [r.offset for r in fetched.records] == expected
    assert [r.value for r in fetched.records] == [b"%d" % o for o in expected]
    assert fetched.next_offset == max(ends)
    assert fetched.high_watermark == offset


def test_read_of_no_records() -> None:
    fetched = fetched_partition(None, 7, 9)
    assert (fetched.records, fetched.next_offset, fetched.high_watermark) == ([], 7, 9)

