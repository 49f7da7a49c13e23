"""Fuzzing the metadata journal's reader with damage: a journal and snapshot written by the
journal, then cut, grown or with a byte changed anywhere, open with every change up to the damage
(a torn last write cut) or are refused with CorruptMetadata in one line naming the file; never
another exception. (The store's own crash tests are tests/store/test_durable_store.py.)"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.store.base import CorruptMetadata
from kafkapy.store.journal import JOURNAL_FILE, SNAPSHOT_FILE, MetadataJournal

_VALUES = st.text(max_size=4) | st.integers()
_CHANGES = st.lists(st.dictionaries(st.sampled_from(["op", "topic", "n"]), _VALUES, min_size=1, max_size=3),
                    max_size=5)


def _identity(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=_CHANGES, journal=_CHANGES, target=st.sampled_from([JOURNAL_FILE, SNAPSHOT_FILE]),
       how=st.sampled_from(["cut", "grow", "change"]), where=st.integers(0, 10_000),
       data=st.binary(min_size=1, max_size=12))
def test_a_damaged_journal_or_snapshot_opens_or_is_refused_in_one_line(
        snapshot: list[dict[str, Any]], journal: list[dict[str, Any]], target: str, how: str, where: int,
        data: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        writer = MetadataJournal(directory)
        writer.open("cluster", _identity)
        for change in snapshot:
            writer.append(change)
        writer.write_snapshot(snapshot)
        for change in journal:
            writer.append(change)
        writer.close()
        path = Path(directory) / target
        content = bytearray(path.read_bytes())
        at = where % (len(content) + 1)
        if how == "cut":
            content = content[:at]
        elif how == "grow":
            content[at:at] = data
        elif content:
            content[at % len(content)] = data[0]
        path.write_bytes(bytes(content))
        reader = MetadataJournal(directory)
        try:
            cluster_id, changes = reader.open("other", _identity)
        except CorruptMetadata as refused:
            assert "\n" not in str(refused) and target in str(refused)
            return
        reader.close()
        assert changes == (snapshot + journal)[:len(changes)] and cluster_id in ("cluster", "other")
