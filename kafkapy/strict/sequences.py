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
  them in order. A batch below the highest acknowledged sequence that was never acknowledged
  itself is a retry of a batch whose answer was lost or failed (the broker may have it, and may
  no longer remember it among its last five): recovery too. A batch ahead of what was
  acknowledged with no such excuse skipped sequences: misuse. The first out-of-order answer
  starts a recovery itself, so the pipelined batches behind the one judged are not judged again.
* A batch the broker had acknowledged before (same epoch, same sequences) is a duplicate; Kafka
  answers it quietly with the first write's offsets (or out of order, once it is older than the
  last five batches). It is normal when the first answer never reached
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
    # its requests not answered yet: stamp -> the batch's (first, last) sequences
    unanswered: dict[int, tuple[int, int]] = attrs.Factory(dict)


class SequenceWatch:
    """Per (producer id, partition): what the producer was told (module docstring)."""

    def __init__(self) -> None:
        self._producers: dict[tuple[int, TopicPartition], _Producer] = {}

    def sent(self, stamp: int, partition: TopicPartition, batch: BatchSequences) -> None:
        """A Produce carrying ``batch`` arrived (stamped ``stamp``)."""
        state = self._producers.setdefault((batch.producer_id, partition), _Producer())
        state.unanswered[stamp] = (batch.first, batch.last)

    def answered(self, stamp: int, partition: TopicPartition, batch: BatchSequences, code: int,
                 delivered: bool) -> tuple[str, str, bool] | None:
        """The answer ``code`` to the batch of request ``stamp``; ``delivered`` when it reaches the
        client. Misuse as (what happened, what was expected, whether out of order rather than a
        duplicate), or None."""
        state = self._producers.setdefault((batch.producer_id, partition), _Producer())
        state.unanswered.pop(stamp, None)
        same_epoch = state.epoch == batch.producer_epoch
        acknowledged = state.acknowledged if same_epoch else -1
        resent = same_epoch and (batch.first, batch.last) in state.batches
        if code == ErrorCode.NONE:
            if delivered:
                if not same_epoch:
                    state.epoch = batch.producer_epoch
                    state.batches.clear()
                state.acknowledged = max(acknowledged, batch.last)
                if not resent:
                    state.batches.append((batch.first, batch.last))
                state.recovering = False
                # what it covers is answered for: a lost answer below it no longer explains a gap
                state.unanswered = {s: b for s, b in state.unanswered.items() if b[1] > batch.last}
            else:
                state.recovering = True
            return self._duplicate(batch, acknowledged, "quietly, with its first offsets") if resent else None
        judged = None
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if resent:
                judged = self._duplicate(batch, acknowledged, "OUT_OF_ORDER_SEQUENCE_NUMBER (it is older "
                                                              "than the last five batches Kafka remembers)")
            elif batch.first > acknowledged and not state.recovering and \
                    not any(s < stamp for s in state.unanswered):
                expected = f"base sequence {acknowledged + 1}" if acknowledged >= 0 else \
                    "the sequence after the last one the producer wrote (0 for its first batch)"
                judged = (f"producer {batch.producer_id} (epoch {batch.producer_epoch}) sent sequences "
                          f"{batch.first}-{batch.last}, answered OUT_OF_ORDER_SEQUENCE_NUMBER, with no "
                          f"earlier batch failed or unanswered to explain the gap", expected, True)
        state.recovering = True
        return judged

    @staticmethod
    def _duplicate(batch: BatchSequences, acknowledged: int, answer: str) -> tuple[str, str, bool]:
        return (f"producer {batch.producer_id} (epoch {batch.producer_epoch}) resent sequences "
                f"{batch.first}-{batch.last}, which the broker had acknowledged; Kafka answers such a "
                f"duplicate {answer}",
                f"the next batch to start at sequence {acknowledged + 1}; a batch is resent only when its "
                f"answer was lost or was an error", False)

    def dropped(self, stamp: int, partition: TopicPartition, batch: BatchSequences) -> None:
        """The request's answer will not reach the client (acks=0, or a refusal)."""
        state = self._producers.setdefault((batch.producer_id, partition), _Producer())
        state.unanswered.pop(stamp, None)
        state.recovering = True
