"""examples/share_group_queue.py runs and says what it should."""

from __future__ import annotations

import json

import pytest
from example_in_process import run_example


def test_share_group_example_splits_releases_and_rejects() -> None:
    pytest.importorskip("confluent_kafka")
    assert json.loads(run_example("share_group_queue.py")) == {
        "accepted": 29, "rejected": ["job-13"], "job-7 delivery count": 2, "every job once": True}
