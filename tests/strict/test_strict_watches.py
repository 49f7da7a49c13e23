"""The watches strict mode judges with, on their own: the assignment parser (garbage gives None,
never an exception; what a consumer encodes comes back), and a model-based run of a well-behaved
idempotent producer through errors and lost answers that the sequence watch never judges."""

from __future__ import annotations

import struct
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.errors import ErrorCode
from kafkapy.strict import assigned_partitions
from kafkapy.strict.groups import GroupWatch
from kafkapy.strict.sequences import BatchSequences, SequenceWatch

TOPIC_NAMES = st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")), min_size=1, max_size=8)


def encode_assignment(partitions: dict[str, list[int]], version: int = 0,
                      user_data: bytes | None = None) -> bytes:
    data = struct.pack(">hi", version, len(partitions))
    for topic, indexes in partitions.items():
        name = topic.encode()
        data += struct.pack(">h", len(name)) + name
        data += struct.pack(f">i{len(indexes)}i", len(indexes), *indexes)
    if user_data is None:
        return data + struct.pack(">i", -1)
    return data + struct.pack(">i", len(user_data)) + user_data


@given(st.dictionaries(TOPIC_NAMES, st.lists(st.integers(0, 1000), max_size=6), max_size=4),
       st.integers(0, 3), st.none() | st.binary(max_size=8))
def test_assignments_read_back_at_any_version(partitions: dict[str, list[int]], version: int,
                                              user_data: bytes | None) -> None:
    decoded = assigned_partitions(encode_assignment(partitions, version, user_data))
    assert decoded == {(topic, p) for topic, indexes in partitions.items() for p in indexes}


@given(st.binary(max_size=64))
def test_garbage_is_none_or_partitions_never_an_exception(data: bytes) -> None:
    decoded = assigned_partitions(data)
    assert decoded is None or isinstance(decoded, frozenset)


def test_empty_assignment_bytes_are_no_partitions() -> None:
    assert assigned_partitions(b"") == frozenset()
    assert assigned_partitions(b"\x00") is None


def test_group_watch_tolerates_a_stale_generation_once_and_judges_one_never_given() -> None:
    watch = GroupWatch()
    watch.joined("g", "m", 1)
    watch.joined("g", "m", 2)
    assert watch.stale("g", "m", 1, sent=10, now=11) is None  # learns of the rebalance
    assert watch.stale("g", "m", 1, sent=9, now=12) is None  # was in flight when it was told
    assert watch.stale("g", "m", 1, sent=13, now=14) is not None  # sent after being told
    assert "never gave it generation 7" in (watch.stale("g", "m", 7, sent=15, now=16) or "")


PARTITION = ("t", 0)
WINDOW = 5  # Kafka keeps the last five batches per producer for deduplication (and so in flight)


class WellBehavedProducer(RuleBasedStateMachine):
    """One idempotent producer on one partition, as librdkafka and the Java producer behave: up to
    five batches unacknowledged (in flight or to be resent), sent in order; after an error it lets
    the in-flight ones come back, then resends every unacknowledged batch in order; after a lost
    answer (a dropped connection: the batches behind it are never read) it resends them all. The
    broker is Kafka's producer-state rule: the next sequence is written, one of the last five
    batches is a duplicate (answered without error), anything else is out of order. The watch
    must never judge this client."""

    def __init__(self) -> None:
        super().__init__()
        self.watch = SequenceWatch()
        self.stamps = 0
        self.next_sequence = 0  # the client's next new sequence
        self.unacknowledged: list[tuple[int, int]] = []  # batches not yet acknowledged, in order
        self.in_flight: deque[tuple[int, int]] = deque()
        self.retry = False
        self.written: list[tuple[int, int]] = []  # the broker's log
        self.judged: list[tuple[str, str, bool]] = []

    @precondition(lambda self: len(self.unacknowledged) < WINDOW and not self.retry)
    @rule(count=st.integers(1, 3))
    def send(self, count: int) -> None:
        batch = (self.next_sequence, self.next_sequence + count - 1)
        self.next_sequence += count
        self.unacknowledged.append(batch)
        self.in_flight.append(batch)

    @precondition(lambda self: bool(self.in_flight))
    @rule(outcome=st.sampled_from(["answered", "answered", "answered", "error", "lost"]))
    def broker_handles(self, outcome: str) -> None:
        first, last = self.in_flight.popleft()
        self.stamps += 1
        batch = BatchSequences(1000, 0, first, last)
        self.watch.sent(self.stamps, PARTITION, batch)
        if outcome == "error":
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # refused before anything is written
        elif (first, last) in self.written[-WINDOW:]:
            code = ErrorCode.NONE
        elif first == (self.written[-1][1] + 1 if self.written else 0):
            self.written.append((first, last))
            code = ErrorCode.NONE
        else:
            code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        if outcome == "lost":  # the answer never leaves; the connection drops the batches behind
            self.in_flight.clear()
            self.resend()
            return
        judged = self.watch.answered(self.stamps, PARTITION, batch, code, True)
        if judged is not None:
            self.judged.append(judged)
        if code == ErrorCode.NONE:
            self.unacknowledged.remove((first, last))
        else:
            self.retry = True
        if self.retry and not self.in_flight:
            self.resend()

    def resend(self) -> None:
        self.retry = False
        self.in_flight.extend(self.unacknowledged)

    @invariant()
    def never_judged(self) -> None:
        assert self.judged == []

    @invariant()
    def the_log_is_in_order_without_duplicates(self) -> None:
        sequences = [s for first, last in self.written for s in range(first, last + 1)]
        assert sequences == list(range(len(sequences)))


TestWellBehavedProducer = WellBehavedProducer.TestCase
TestWellBehavedProducer.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


def test_a_producer_skipping_or_resending_acknowledged_batches_is_judged() -> None:
    watch = SequenceWatch()
    watch.sent(1, PARTITION, BatchSequences(7, 0, 0, 1))
    assert watch.answered(1, PARTITION, BatchSequences(7, 0, 0, 1), ErrorCode.NONE, True) is None
    watch.sent(2, PARTITION, BatchSequences(7, 0, 0, 1))
    duplicate = watch.answered(2, PARTITION, BatchSequences(7, 0, 0, 1), ErrorCode.NONE, True)
    assert duplicate is not None and duplicate[2] is False
    watch.sent(3, PARTITION, BatchSequences(7, 0, 4, 4))
    skipped = BatchSequences(7, 0, 4, 4)
    gap = watch.answered(3, PARTITION, skipped, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, True)
    assert gap is not None and gap[1] == "base sequence 2" and gap[2] is True
    # a new epoch starts its sequences again: not a duplicate
    watch.sent(4, PARTITION, BatchSequences(7, 1, 0, 1))
    assert watch.answered(4, PARTITION, BatchSequences(7, 1, 0, 1), ErrorCode.NONE, True) is None


def test_an_acknowledged_batch_resent_after_it_left_kafkas_window_is_a_duplicate() -> None:
    watch = SequenceWatch()
    for stamp in range(1, 8):  # seven one-record batches, all acknowledged
        sent = BatchSequences(9, 0, stamp - 1, stamp - 1)
        watch.sent(stamp, PARTITION, sent)
        assert watch.answered(stamp, PARTITION, sent, ErrorCode.NONE, True) is None
    old = BatchSequences(9, 0, 0, 0)
    watch.sent(8, PARTITION, old)
    judged = watch.answered(8, PARTITION, old, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, True)
    assert judged is not None and judged[2] is False and "older than the last five" in judged[0]


def test_an_unacknowledged_batch_below_the_acknowledged_ones_is_a_retry() -> None:
    watch = SequenceWatch()
    lost, later = BatchSequences(9, 0, 0, 0), BatchSequences(9, 0, 1, 1)
    watch.sent(1, PARTITION, lost)  # written, its answer lost (no ``answered``)
    watch.sent(2, PARTITION, later)
    assert watch.answered(2, PARTITION, later, ErrorCode.NONE, True) is None
    watch.sent(3, PARTITION, lost)
    assert watch.answered(3, PARTITION, lost, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, True) is None


def test_a_member_may_commit_what_it_is_revoking_during_the_generation_that_takes_it() -> None:
    watch = GroupWatch()
    t = "t"
    watch.synced("g", "m", 3, frozenset({(t, 0), (t, 1), (t, 2)}))
    watch.synced("g", "m", 4, frozenset({(t, 1), (t, 2)}))  # cooperative: partition 0 is revoked during 4
    assert watch.unowned("g", "m", 4, [(t, 0), (t, 1)])[0] == []
    watch.synced("g", "m", 5, frozenset({(t, 1), (t, 2)}))
    assert watch.unowned("g", "m", 5, [(t, 0), (t, 1)])[0] == [(t, 0)]
    assert watch.unowned("g", "m", 9, [(t, 0)]) == ([], frozenset())  # a generation not seen: not judged
