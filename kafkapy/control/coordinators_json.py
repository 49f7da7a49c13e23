"""The coordinators' frozen views (kafkapy.inspection: GroupView, TransactionView) as JSON.

Field for field what ``attrs.asdict`` gives, so the JSON names are the Python ones a test author
already reads in docs/testing.md: nested views become objects, tuples lists, mappings (a
member's assignment, topic -> partitions) objects. The views hold no bytes (member metadata and
assignments are read as topics and partitions by kafkapy.inspection.groups); were one added,
this refuses it rather than guess an encoding (``/records`` shows how bytes go to JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["view_json"]


def view_json(value: Any) -> Any:
    """``value`` (an attrs view, or what one holds) as JSON-able lists, objects and scalars."""
    if attrs.has(type(value)):
        return {field.name: view_json(getattr(value, field.name)) for field in attrs.fields(type(value))}
    if isinstance(value, Mapping):
        return {str(key): view_json(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [view_json(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"no JSON form for a {type(value).__name__} in a view")
