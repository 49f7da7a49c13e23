"""Stored records as JSON: bytes as UTF-8 text where they are text, base64 where they are not.

Each record says which with its ``encoding`` field, for its key, value and header values alike:
``"utf-8"`` when every one of them decodes as UTF-8 (what a JSON or string producer wrote reads
as itself), else ``"base64"``; ``encoding=base64`` in the query asks for base64 throughout, for
a client that wants bytes without guessing. Nulls stay null.
"""

from __future__ import annotations

import base64
from typing import Any

from kafkapy.inspection import StoredRecord

__all__ = ["ENCODINGS", "record_json"]

ENCODINGS = ("utf-8", "base64")


def _utf8(values: list[bytes | None]) -> list[str | None] | None:
    try:
        return [None if v is None else v.decode("utf-8") for v in values]
    except UnicodeDecodeError:
        return None


def record_json(record: StoredRecord, encoding: str = "utf-8") -> dict[str, Any]:
    """``record`` as JSON; ``encoding`` "utf-8" (where the bytes allow) or "base64"."""
    values = [record.key, record.value, *(value for _, value in record.headers)]
    texts = _utf8(values) if encoding == "utf-8" else None
    if texts is None:
        encoding = "base64"
        texts = [None if v is None else base64.b64encode(v).decode("ascii") for v in values]
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
            "encoding": encoding, "key": texts[0], "value": texts[1],
            "headers": [[name, text] for (name, _), text in zip(record.headers, texts[2:])],
            "timestamp": record.timestamp, "producer_id": record.producer_id,
            "producer_epoch": record.producer_epoch, "sequence": record.sequence,
            "is_transactional": record.is_transactional, "is_control": record.is_control}
