"""The fifty partitions of a new ``__consumer_offsets`` under log.dirs are loaded in turn by the
coordinator's loads runner, one slice per loop step (kafkapy.server.partition_loads), beyond the
first slices the election's pass runs in place for up to ``IN_PLACE_BUDGET_S``: each first slice
creates the partition's log (its directory, segment and index files, checkpoints, with fsyncs),
and the fifty in one go held the broker's loop 0.1-0.7 s on the shared machine, every other
connection waiting (docs/performance.md)."""

from __future__ import annotations

import itertools
import sys
import threading
from pathlib import Path

import pytest

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.partitioning import offsets_partition_for
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server import coordinator_elections

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

PARTITIONS = 50  # offsets.topic.num.partitions' default


def test_the_offsets_topics_partitions_start_one_per_loop_step_and_each_log_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A callback that runs once in every iteration of the broker's loop counts the loaded
    partitions while FindCoordinator creates the topic: the count grows by at most two (the
    runner's slice, and one a request started in place) between two iterations, where it jumped by
    49 with the starts in one go. The election's in-place budget is zero here, as the partitions
    it finishes within its 10 ms depend on the disk's speed (nine on tmpfs). Every partition ends
    loaded, each with its log on disk."""
    monkeypatch.setattr(coordinator_elections, "IN_PLACE_BUDGET_S", 0.0)
    with Broker({"broker.id": 1, "log.dirs": str(tmp_path)}) as broker:
        assert broker.runtime is not None and broker._loop is not None
        loop = broker._loop
        groups = next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))
        seen: list[int] = []
        all_loaded = threading.Event()

        def count() -> None:
            seen.append(len(groups.loaded_partitions()))
            if seen[-1] < PARTITIONS:
                loop.call_soon(count)  # the next iteration of the loop, not this one
            else:
                all_loaded.set()

        loop.call_soon_threadsafe(count)
        with KafkaSocket(broker.bootstrap_servers, timeout=60) as conn:
            [found] = conn.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]}
                                ).body["coordinators"]
            assert found["error_code"] == ErrorCode.NONE
            assert all_loaded.wait(60)
            growth = [after - before for before, after in itertools.pairwise(seen)]
            assert max(growth) <= 2, growth
            assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("__consumer_offsets-")) == \
                sorted(f"__consumer_offsets-{p}" for p in range(PARTITIONS))
            assert groups.coordinates_now("g")


def test_a_request_for_a_partition_queued_behind_the_others_is_served_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """FindCoordinator makes the topic and its fifty loads are queued (no in-place budget here);
    an OffsetFetch right behind it, for a group of the last partition, loads that (empty)
    partition with its own slice and is answered, where it was COORDINATOR_LOAD_IN_PROGRESS,
    which kafka-python's admin client does not retry (list_group_offsets failed)."""
    monkeypatch.setattr(coordinator_elections, "IN_PLACE_BUDGET_S", 0.0)
    group = next(name for name in (f"g{i}" for i in itertools.count())
                 if offsets_partition_for(name, PARTITIONS) == PARTITIONS - 1)
    with Broker() as broker, KafkaSocket(broker.bootstrap_servers, timeout=60) as conn:
        conn.send(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        conn.send(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                           "require_stable": False})
        [found] = conn.read_response(ApiKey.FIND_COORDINATOR, 4).body["coordinators"]
        assert found["error_code"] == ErrorCode.NONE
        [fetched] = conn.read_response(ApiKey.OFFSET_FETCH, 8).body["groups"]
        assert (fetched["error_code"], fetched["topics"]) == (ErrorCode.NONE, [])
