"""Partition logs: storage, append validation and idempotent producer state (issue 15)."""
