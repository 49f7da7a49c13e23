"""Inspection for tests: what the broker's logs hold, decoded (``broker.records(...)``), what its
partitions know of their producers (``broker.producers()``), what its group and transaction
coordinators hold (``broker.groups()``, ``broker.transactions()``), and the connections it holds
open (``broker.connections()``)."""

from kafkapy.inspection.groups import CommittedOffset, GroupMemberView, GroupView
from kafkapy.inspection.producers import ProducerView
from kafkapy.inspection.records import Isolation, StoredRecord, stored_records
from kafkapy.inspection.transactions import TransactionView

__all__ = ["CommittedOffset", "GroupMemberView", "GroupView", "Isolation", "ProducerView", "StoredRecord",
           "TransactionView", "stored_records"]
