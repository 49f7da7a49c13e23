"""The memory backend holds 1 GiB of batches in at most 1.15 GiB of RSS (issue 15), measured in a
fresh interpreter by the benchmark's own measurement (benchmarks/log.py)."""

from __future__ import annotations

import pytest

from benchmarks.log import GIB, hold


@pytest.mark.parametrize(
    "batch_bytes",
    [
        16 * 1024,  # a producer's usual batch (batch.size 16384)
        pytest.param(1024, marks=pytest.mark.slow),  # one ~1 KB record per batch: most bookkeeping per byte
    ],
)
def test_one_gib_held_costs_at_most_1_15_gib_of_rss(batch_bytes: int) -> None:
    result = hold(GIB, batch_bytes)
    assert result["held"] >= GIB
    assert result["rss_per_byte_held"] <= 1.15, result
