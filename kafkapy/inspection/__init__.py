"""Inspection for tests: what the broker's logs hold, decoded (``broker.records(...)``), where they
stand (``broker.log_offsets(...)``: last stable offset, high watermark, aborted transactions), what its
partitions know of their producers (``broker.producers()``), what its group and transaction
coordinators hold (``broker.groups()``, ``broker.transactions()``), and the connections it holds
open (``broker.connections()``)."""

from kafkapy.inspection.groups import CommittedOffset, GroupMemberView, GroupView
from kafkapy.inspection.log_offsets import AbortedTransaction, LogOffsets
from kafkapy.inspection.producers import ProducerView
from kafkapy.inspection.records import Isolation, StoredRecord, stored_records
from kafkapy.inspection.transactions import TransactionView

__all__ = ["AbortedTransaction", "CommittedOffset", "GroupMemberView", "GroupView", "Isolation", "LogOffsets",
           "ProducerView", "StoredRecord", "TransactionView", "stored_records"]
