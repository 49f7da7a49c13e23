"""Loading a __share_group_state partition, as Kafka's CoordinatorRuntime loads one: a partition
within one slice loads in place; a longer one loads in slices (the loop runs other work between
them) and meanwhile the five state operations for its keys are refused COORDINATOR_LOAD_IN_PROGRESS;
the loaded state is the state a load in one go gives (Hypothesis: any operations on a few keys,
deletes' tombstones, records of versions this broker does not read); a leadership change stops it."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log import LogManager
from kafkapy.protocol.one_record_batch import one_record_batch
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC, ShareCoordinator
from kafkapy.sharestate.state import SharePartitionKey, StateBatch

NOW = 1_700_000_000_000
KEYS = [("workers", uuid.UUID(int=7), p) for p in range(3)] + [("others", uuid.UUID(int=8), 0)]
LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
ONE_GO = 1 << 40  # records a slice: never sliced


@attrs.define
class Leadership:
    epoch: int | None = 0  # None: another broker leads the partition


def coordinator(logs: LogManager, leadership: Leadership, slice_records: int = ONE_GO,
                snapshot_every: int = 3) -> ShareCoordinator:
    return ShareCoordinator(logs.get_or_create, lambda partition: leadership.epoch, lambda: 1, snapshot_every,
                            lambda: NOW, slice_records=slice_records)


def refusal(call: Callable[..., object], *args: object) -> ErrorCode:
    """What ``call(*args)`` was refused with, NONE if it was not."""
    try:
        call(*args)
    except KafkaApiError as refused:
        return ErrorCode(refused.code)
    return ErrorCode.NONE


Operation = tuple[str, int, int, int, int]  # what, key index, epoch, start, batch length

operations = st.lists(st.tuples(st.sampled_from(["initialize", "write", "read", "delete", "unknown"]),
                                st.integers(0, len(KEYS) - 1), st.integers(0, 3), st.integers(0, 30),
                                st.integers(0, 4)), max_size=60)


def written(ops: list[Operation], snapshot_every: int) -> LogManager:
    """The records a coordinator writes for ``ops`` (refused ones write nothing), plus records of
    an unknown version where asked."""
    logs = LogManager()
    writer = coordinator(logs, Leadership(), snapshot_every=snapshot_every)
    for what, index, epoch, start, length in ops:
        key: SharePartitionKey = KEYS[index]
        if what == "initialize":
            refusal(writer.initialize, key, epoch, start)
        elif what == "write":
            refusal(writer.write, key, epoch, epoch, start, (StateBatch(start, start + length, 2, 1),))
        elif what == "read":
            refusal(writer.read, key, epoch)
        elif what == "delete":
            refusal(writer.delete, key)
        else:
            log = logs.get_or_create(SHARE_STATE_TOPIC, 0)
            log.append(one_record_batch(struct.pack(">h", 99) + b"\x00", b"\x00\x63",
                                        base_offset=log.log_end_offset, base_timestamp=NOW))
    return logs


async def loaded(logs: LogManager, slice_records: int, snapshot_every: int) -> ShareCoordinator:
    """A new coordinator over ``logs`` with the partition loaded (by a read, which may be refused
    while the load goes on)."""
    fresh = coordinator(logs, Leadership(), slice_records, snapshot_every)
    refusal(fresh.summary, KEYS[0], -1)
    await fresh.wait_for_loads()
    return fresh


@settings(max_examples=60, deadline=None)
@given(ops=operations, slice_records=st.integers(1, 5), snapshot_every=st.integers(1, 4))
def test_a_load_in_slices_gives_the_state_a_load_in_one_go_gives(ops: list[Operation], slice_records: int,
                                                                  snapshot_every: int) -> None:
    async def scenario() -> None:
        logs = written(ops, snapshot_every)
        one_go = await loaded(logs, ONE_GO, snapshot_every)
        sliced = await loaded(logs, slice_records, snapshot_every)
        assert sliced.shard.states == one_go.shard.states
        assert sliced.shard._updates == one_go.shard._updates
        # and both go on alike: the next write is a snapshot in both or in neither
        for key in KEYS:
            if key in one_go.shard.states:
                state = one_go.shard.states[key]
                args = (key, state.state_epoch, state.leader_epoch, state.start_offset, ())
                assert refusal(one_go.write, *args) == refusal(sliced.write, *args)
        assert one_go.shard.states == sliced.shard.states

    asyncio.run(scenario())


def long_partition(records: int) -> LogManager:
    logs = LogManager()
    writer = coordinator(logs, Leadership(), snapshot_every=1_000)
    writer.initialize(KEYS[0], 1, 0)
    for n in range(records - 1):
        writer.write(KEYS[0], 1, 1, 0, (StateBatch(n, n, 2, 1),))
    return logs


def test_a_partition_within_one_slice_loads_in_place() -> None:
    async def scenario() -> None:
        fresh = coordinator(long_partition(9), Leadership(), slice_records=10)
        assert fresh.summary(KEYS[0], -1).start_offset == 0
        assert fresh.loading() == []

    asyncio.run(scenario())


def test_a_longer_partition_loads_in_slices_refusing_its_keys_meanwhile() -> None:
    async def scenario() -> None:
        fresh = coordinator(long_partition(200), Leadership(), slice_records=10)
        key = KEYS[0]
        answers = [refusal(fresh.initialize, key, 2, 0), refusal(fresh.read, key, 1),
                   refusal(fresh.write, key, 1, 1, 0, ()), refusal(fresh.summary, key, -1),
                   refusal(fresh.delete, key)]
        assert answers == [LOADING] * 5
        steps = 0
        while fresh.loading():
            steps += 1
            await asyncio.sleep(0)  # the loop runs this between the slices
        assert steps >= 20 - 5  # each request above ran one slice itself; the runner the rest, one a step
        state = fresh.summary(key, -1)
        assert [(b.first_offset, b.last_offset) for b in state.batches] == [(0, 198)]

    asyncio.run(scenario())


def test_a_load_stops_when_leadership_moves_and_starts_again_under_a_new_epoch() -> None:
    async def scenario() -> None:
        leadership = Leadership()
        fresh = coordinator(long_partition(200), leadership, slice_records=10)
        assert refusal(fresh.summary, KEYS[0], -1) == LOADING
        await asyncio.sleep(0)
        leadership.epoch = None  # another broker leads it now
        await fresh.wait_for_loads()
        assert fresh.loading() == [] and fresh.shard.states == {}
        assert refusal(fresh.summary, KEYS[0], -1) == ErrorCode.NOT_COORDINATOR
        leadership.epoch = 1
        assert refusal(fresh.summary, KEYS[0], -1) == LOADING
        leadership.epoch = 2  # away and back again before that load ended: it is replaced
        assert refusal(fresh.summary, KEYS[0], -1) == LOADING
        await fresh.wait_for_loads()
        assert refusal(fresh.summary, KEYS[0], -1) == ErrorCode.NONE

    asyncio.run(scenario())
