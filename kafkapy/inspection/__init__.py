"""Inspection for tests: what the broker's logs hold, decoded (``broker.records(...)``)."""

from kafkapy.inspection.records import StoredRecord, stored_records

__all__ = ["StoredRecord", "stored_records"]
