"""An idempotent producer's sequences as the broker acknowledged them, for judging its batches.

Theory of operation
-------------------
Per producer id and partition, strict mode keeps what the producer was told: the epoch and the
last sequence of the batches answered without error, whether it is recovering from a failure,
and which of its requests are still unanswered (a stamp each, in arrival order). The broker's
producer state decides what is out of order or a duplicate; strict mode decides whether the
client could have known better (docs/testing.md, "Strict mode"):

* OUT_OF_ORDER_SEQUENCE_NUMBER is normal while the producer recovers: an earlier batch for the
  partition failed (any error) or has no answer yet (a dropped connection, a request in flight on
  another connection), so the batches sent behind it arrive with a gap, and the client retries
  them in order. With no such excuse the producer skipped sequences: misuse. The first
  out-of-order answer starts a recovery itself, so the pipelined batches behind the one judged
  are not judged again.
* A batch the broker had acknowledged before (same epoch, same sequences) is a duplicate; Kafka
  answers it quietly with the first write's offsets. It is normal when the first answer never reached
  the client (a dropped connection, a truncated answer: the retry is what idempotence is for),
  and misuse when it did: the client resent a batch it had been told was written.

An answer counts as reaching the client when strict mode's interceptor (the outermost) sends it
on as the handler's body; an answer an inner interceptor re-encoded (a truncated one) or dropped
does not.
"""

from __future__ import annotations

import collections
from typing import NamedTuple

import attrs

from kafkapy.errors import ErrorCode

__all__ = ["BatchSequences", "SequenceWatch"]

TopicPartition = tuple[str, int]
# Acknowledged batches remembered per producer and partition: more than the five a producer may
# have in flight (max.in.flight.requests.per.connection), the most it can resend at once.
ACKNOWLEDGED_KEPT = 32


class BatchSequences(NamedTuple):
    """The idempotence fields of one produced batch."""

    producer_id: int
    producer_epoch: int
    first: int  # base sequence
    last: int


@attrs.define
class _Producer:
    epoch: int = -1
    acknowledged: int = -1  # the highest sequence answered without error at ``epoch``; -1: none
    # the batches (first, last) answered without error at ``epoch``, the latest ones
    batches: collections.deque[tuple[int, int]] = attrs.Factory(
        lambda: collections.deque(maxlen=ACKNOWLEDGED_KEPT))
    recovering: bool = False
    unanswered: set[int] = attrs.Factory(set)  # stamps of its requests not answered yet


class SequenceWatch:
    """Per (producer id, partition): what the producer was told (module docstring)."""

    def __init__(self) -> None:
        self._producers: dict[tuple[int, TopicPartition], _Producer] = {}

    def sent(self, stamp: int, partition: TopicPartition, batch: BatchSequences) -> None:
        """A Produce carrying ``batch`` arrived (stamped ``stamp``)."""
        self._producers.setdefault((batch.producer_id, partition), _Producer()).unanswered.add(stamp)

    def answered(self, stamp: int, partition: TopicPartition, batch: BatchSequences, code: int,
                 delivered: bool) -> tuple[str, str, bool] | None:
        """The answer ``code`` to the batch of request ``stamp``; ``delivered`` when it reaches the
        client. Misuse as (what happened, what was expected, whether out of order rather than a
        duplicate), or None."""
        state = self._producers.setdefault((batch.producer_id, partition), _Producer())
        state.unanswered.discard(stamp)
        same_epoch = state.epoch == batch.producer_epoch
        acknowledged = state.acknowledged if same_epoch else -1
        judged: tuple[str, str, bool] | None = None
        if code == ErrorCode.NONE:
            if same_epoch and (batch.first, batch.last) in state.batches:
                judged = (f"producer {batch.producer_id} (epoch {batch.producer_epoch}) resent sequences "
                          f"{batch.first}-{batch.last}, which the broker had acknowledged (up to "
                          f"{acknowledged}); Kafka answers such a duplicate quietly with its first offsets",
                          f"the next batch to start at sequence {acknowledged + 1}; a batch is resent only "
                          f"when its answer was lost or was an error", False)
            if delivered:
                if not same_epoch:
                    state.epoch = batch.producer_epoch
                    state.batches.clear()
                state.acknowledged = max(acknowledged, batch.last)
                if (batch.first, batch.last) not in state.batches:
                    state.batches.append((batch.first, batch.last))
                state.recovering = False
                state.unanswered = {s for s in state.unanswered if s > stamp}
            else:
                state.recovering = True
            return judged
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            excused = state.recovering or any(s < stamp for s in state.unanswered)
            if not excused:
                expected = f"base sequence {acknowledged + 1}" if acknowledged >= 0 else \
                    "the sequence after the last one the producer wrote (0 for its first batch)"
                judged = (f"producer {batch.producer_id} (epoch {batch.producer_epoch}) sent sequences "
                          f"{batch.first}-{batch.last}, answered OUT_OF_ORDER_SEQUENCE_NUMBER, with no "
                          f"earlier batch failed or unanswered to explain the gap", expected, True)
        state.recovering = True
        return judged

    def dropped(self, stamp: int, partition: TopicPartition, batch: BatchSequences) -> None:
        """The request's answer will not reach the client (acks=0, or a refusal)."""
        state = self._producers.setdefault((batch.producer_id, partition), _Producer())
        state.unanswered.discard(stamp)
        state.recovering = True
