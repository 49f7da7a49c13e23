"""The share coordinator's shard against a model (hypothesis RuleBasedStateMachine): per offset
state and delivery count, the start offset, and the two fences (state epoch, leader epoch), through
Initialize, Write, Read and Delete; and a shard that loads the records written equals it, whatever
the snapshot cadence."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.sharestate.records import decode_record, encode_record
from kafkapy.sharestate.state import ShareStateRecord, ShareStateShard, StateBatch

KEY = ("workers", uuid.UUID(int=42), 1)
batch_lists = st.lists(st.builds(lambda first, length, state, count: StateBatch(first, first + length, state,
                                                                                count),
                                 st.integers(0, 40), st.integers(0, 5), st.sampled_from([0, 2, 4]),
                                 st.integers(0, 4)), max_size=3)


class ShardModel(RuleBasedStateMachine):
    @initialize(every=st.integers(1, 4))
    def start(self, every: int) -> None:
        self.shard = ShareStateShard(snapshot_every=every)
        self.every = every
        self.model: dict[str, Any] | None = None  # state_epoch, leader_epoch, start, offsets
        self.written: list[tuple[bytes, bytes | None]] = []

    def _commit(self, record: ShareStateRecord | None) -> None:
        if record is not None:
            self.written.append(encode_record(record))
            self.shard.replay(record)

    def _refused(self, call: Any) -> ErrorCode | None:
        try:
            self._commit(call())
        except KafkaApiError as refusal:
            return ErrorCode(refusal.code)
        return None

    @rule(state_epoch=st.integers(0, 3), start=st.integers(0, 30))
    def initialize_state(self, state_epoch: int, start: int) -> None:
        code = self._refused(lambda: self.shard.initialize(KEY, state_epoch, start))
        if self.model is not None and self.model["state_epoch"] > state_epoch:
            assert code == ErrorCode.FENCED_STATE_EPOCH
            return
        assert code is None
        self.model = {"state_epoch": state_epoch, "leader_epoch": 0, "start": start, "offsets": {}}

    @rule(older_state=st.booleans(), leader_epoch=st.integers(-1, 4), start=st.integers(-1, 30),
          batches=batch_lists)
    def write_state(self, older_state: bool, leader_epoch: int, start: int,
                    batches: list[StateBatch]) -> None:
        # A leader writes under the state epoch it read (or an older one, which is fenced).
        current = 0 if self.model is None else self.model["state_epoch"]
        state_epoch = current - 1 if older_state else current
        code = self._refused(lambda: self.shard.write(KEY, state_epoch, leader_epoch, start, batches))
        model = self.model
        if model is not None and leader_epoch != -1 and model["leader_epoch"] > leader_epoch:
            assert code == ErrorCode.FENCED_LEADER_EPOCH
            return
        if model is not None and model["state_epoch"] > state_epoch:
            assert code == ErrorCode.FENCED_STATE_EPOCH
            return
        assert code is None
        if model is None:
            model = self.model = {"state_epoch": max(state_epoch, 0), "leader_epoch": leader_epoch,
                                  "start": start if start != -1 else 0, "offsets": {}}
        elif leader_epoch != -1:
            model["leader_epoch"] = leader_epoch
        if start != -1:
            model["start"] = start
        for batch in batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                model["offsets"][offset] = (batch.delivery_state, batch.delivery_count)
        # What falls below the start offset is gone for good (Kafka prunes it too).
        model["offsets"] = {o: v for o, v in model["offsets"].items() if o >= model["start"]}

    @rule(leader_epoch=st.integers(-1, 5))
    def read_state(self, leader_epoch: int) -> None:
        try:
            state, record = self.shard.read(KEY, leader_epoch)
        except KafkaApiError as refusal:
            assert self.model is not None and refusal.code == ErrorCode.FENCED_LEADER_EPOCH
            assert leader_epoch != -1 and self.model["leader_epoch"] > leader_epoch
            return
        self._commit(record)
        if self.model is None:
            assert (state.start_offset, state.state_epoch, state.batches) == (-1, 0, ())
            return
        assert state.start_offset == self.model["start"]
        if leader_epoch > self.model["leader_epoch"]:
            self.model["leader_epoch"] = leader_epoch

    @rule()
    def delete_state(self) -> None:
        self._commit(self.shard.delete(KEY))
        self.model = None

    def _kept(self, shard: ShareStateShard) -> tuple[Any, ...] | None:
        state = shard.states.get(KEY)
        if state is None:
            return None
        offsets = {o: (b.delivery_state, b.delivery_count) for b in state.batches
                   for o in range(b.first_offset, b.last_offset + 1)}
        return state.state_epoch, state.leader_epoch, state.start_offset, offsets

    @invariant()
    def the_shard_is_the_model(self) -> None:
        if self.model is None:
            assert self._kept(self.shard) is None
            return
        model = self.model
        assert self._kept(self.shard) == (model["state_epoch"], model["leader_epoch"], model["start"],
                                          model["offsets"])

    @invariant()
    def a_load_of_the_records_is_the_shard(self) -> None:
        loaded = ShareStateShard(snapshot_every=self.every)
        for key, value in self.written:
            loaded.replay(decode_record(key, value))
        assert self._kept(loaded) == self._kept(self.shard)


TestShardModel = ShardModel.TestCase
TestShardModel.settings = settings(max_examples=100, stateful_step_count=20, deadline=None)
