"""Exchanges as flat rows: the output of ``kafkapy decode`` and ``kafkapy spark-decode``.

One row per request/response exchange (and per stretch of stream the capture
lost), with the columns of :data:`COLUMNS`. Decoded bodies are JSON strings,
so a row fits any table format; :func:`to_json` is the encoder (bytes become
base64, UUIDs strings, record batches a list of records).

The row status is coarser than pairing's and named for a reader of the
table rather than for the pairing algorithm:

    ok                 request and response decoded
    empty_response     the broker answered with only a correlation id
    unmatched_request  no response in the capture
    unmatched_response a response whose request the capture does not have
    truncated          the capture cut a frame short
    undecodable        a complete frame that does not decode (or a file that is not a capture)
    gap                bytes the capture lost between frames (a row of its own)
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, BinaryIO

from kafkapy.capture.errors import CaptureError
from kafkapy.capture.frames import Frame, FrameReader, Unframed
from kafkapy.capture.pairing import Exchange, ExchangeStatus, Pairer
from kafkapy.capture.tcp import DEFAULT_KAFKA_PORTS, Connection
from kafkapy.errors import DecodeError

__all__ = [
    "COLUMNS",
    "STATUSES",
    "arrow_schema",
    "decode_capture",
    "exchange_row",
    "gap_row",
    "rows_to_arrow",
    "to_json",
    "write_parquet",
]

#: Column names, in output order.
COLUMNS = (
    "ts",
    "src",
    "dst",
    "connection_id",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "client_id",
    "request",
    "response",
    "error_code",
    "latency_ms",
    "request_bytes",
    "response_bytes",
    "status",
    "reason",
    "topics",
    "capture",
)

STATUSES = (
    "ok",
    "unmatched_request",
    "unmatched_response",
    "truncated",
    "undecodable",
    "gap",
    "empty_response",
)

_STATUS: dict[ExchangeStatus, str] = {
    "ok": "ok",
    "empty_response": "empty_response",
    "no_response": "unmatched_request",
    "orphan_response": "unmatched_response",
    "truncated": "truncated",
    "error": "undecodable",
}

Row = dict[str, Any]


# --- JSON ------------------------------------------------------------------------------------


def _records_json(records: Any) -> Any:
    try:
        return [r.to_dict() for r in records.records(check_crc=False)]
    except DecodeError as exc:
        return {"undecodable_records": base64.b64encode(bytes(records)).decode("ascii"), "error": str(exc)}


def _default(decode_records: bool) -> Callable[[Any], Any]:
    from kafkapy.protocol import Records

    def default(value: Any) -> Any:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, Records):
            if decode_records:
                return _records_json(value)
            return base64.b64encode(bytes(value)).decode("ascii")
        if isinstance(value, Mapping):
            return dict(value)
        if isinstance(value, (set, frozenset, tuple)):
            return list(value)
        return str(value)

    return default


_DEFAULTS: dict[bool, Callable[[Any], Any]] = {}


def to_json(value: Any, *, decode_records: bool = True) -> str:
    """A decoded body (or any value inside one) as compact JSON.

    bytes -> base64; UUID -> str; Records -> a list of ``Record.to_dict()``
    when ``decode_records``, else base64 of the raw batches.
    """
    default = _DEFAULTS.get(decode_records)
    if default is None:
        default = _DEFAULTS[decode_records] = _default(decode_records)
    return json.dumps(value, default=default, separators=(",", ":"), ensure_ascii=False)


# --- rows ------------------------------------------------------------------------------------


def _topics(body: Mapping[str, Any] | None) -> list[str] | None:
    """Topic names a request names at its top level (Produce's topic_data, most others' topics)."""
    if body is None:
        return None
    names: list[str] = []
    for field in ("topic_data", "topics"):
        entries = body.get(field)
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if isinstance(entry, Mapping):
                name = entry.get("name", entry.get("topic"))
                if isinstance(name, str) and name not in names:
                    names.append(name)
    return names


def _error_code(body: Mapping[str, Any] | None) -> int | None:
    if body is None:
        return None
    code = body.get("error_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _frame_bytes(frame: Frame | None) -> int | None:
    return None if frame is None else 4 + frame.size


def _reason(x: Exchange) -> str | None:
    status = x.status
    if status == "ok":
        return None
    if status == "empty_response":
        return "the broker answered with only a correlation id (unknown or unsupported request)"
    if status == "no_response":
        return "no response in the capture"
    if status == "orphan_response":
        return "response to a request the capture does not have"
    parts: list[str] = []
    for name, frame in (("request", x.request_frame), ("response", x.response_frame)):
        if frame is not None and frame.truncated:
            parts.append(f"{name} frame truncated ({frame.reason}, {frame.missing} bytes missing)")
    for name, error in (("request", x.request_error), ("response", x.response_error)):
        if error is not None:
            parts.append(f"{name}: {error}")
    return "; ".join(parts) or status


def _status(x: Exchange) -> str:
    status = _STATUS[x.status]
    if status == "truncated":
        for frame in (x.request_frame, x.response_frame):
            if frame is not None and frame.truncated and frame.reason == "gap":
                return "gap"
    return status


def exchange_row(x: Exchange, *, capture: str | None = None, decode_records: bool = True) -> Row:
    """The row of one Exchange (see :data:`COLUMNS`)."""
    from kafkapy.protocol import api_name

    first = x.request_frame or x.response_frame
    conn: Connection = x.conn
    if first is not None and not first.from_client:
        src, dst = conn.server, conn.client
    else:
        src, dst = conn.client, conn.server
    api_key = x.api_key
    request_body = x.request.body if x.request is not None else None
    response_body = x.response.body if x.response is not None else None
    latency = x.latency
    return {
        "ts": first.ts if first is not None else conn.first_ts,
        "src": str(src),
        "dst": str(dst),
        "connection_id": conn.id,
        "api_key": api_key,
        "api_name": api_name(api_key) if api_key is not None else None,
        "api_version": x.api_version,
        "correlation_id": x.correlation_id,
        "client_id": x.header.client_id if x.header is not None else None,
        "request": to_json(request_body, decode_records=decode_records) if request_body is not None else None,
        "response": (
            to_json(response_body, decode_records=decode_records) if response_body is not None else None
        ),
        "error_code": _error_code(response_body),
        "latency_ms": latency * 1000.0 if latency is not None else None,
        "request_bytes": _frame_bytes(x.request_frame),
        "response_bytes": _frame_bytes(x.response_frame),
        "status": _status(x),
        "reason": _reason(x),
        "topics": _topics(request_body),
        "capture": capture,
    }


def _empty_row(ts: float, status: str, reason: str, capture: str | None) -> Row:
    row: Row = dict.fromkeys(COLUMNS)
    row.update(ts=ts, status=status, reason=reason, capture=capture)
    return row


def gap_row(u: Unframed, *, capture: str | None = None) -> Row:
    """A row for stream bytes the capture does not have."""
    conn = u.conn
    from_client = conn.from_client(u.side)
    src, dst = (conn.client, conn.server) if from_client else (conn.server, conn.client)
    size = "an unknown number of" if u.length is None else str(u.length)
    row = _empty_row(
        u.ts, "gap", f"{size} bytes missing from the {'client' if from_client else 'server'} stream "
        f"at offset {u.offset}", capture,
    )  # fmt: skip
    row.update(src=str(src), dst=str(dst), connection_id=conn.id)
    return row


def decode_capture(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    kafka_ports: Iterable[int] = DEFAULT_KAFKA_PORTS,
    decode_records: bool = True,
    capture: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Row]:
    """Every row of one capture file, streamed (memory bounded by open connections).

    A file that is not a capture, or that breaks off, ends with an
    ``undecodable`` row saying why rather than an exception. ``progress`` is
    called now and then with the count of packets read so far.
    """
    if capture is None and isinstance(source, (str, os.PathLike)):
        capture = os.fspath(source)
    reader = FrameReader(source, kafka_ports=kafka_ports)
    pairer = Pairer()
    last_ts = 0.0
    try:
        n = 0
        for event in reader:
            if isinstance(event, Frame):
                last_ts = event.ts
                for x in pairer.feed(event):
                    yield exchange_row(x, capture=capture, decode_records=decode_records)
            elif isinstance(event, Unframed):
                # length None: joined mid-stream, a gap before the first byte (not news)
                if event.reason == "missing" and event.length is not None:
                    yield gap_row(event, capture=capture)
            else:
                for x in pairer.feed(event):
                    yield exchange_row(x, capture=capture, decode_records=decode_records)
            n += 1
            if progress is not None and n % 4096 == 0:
                progress(reader.packet_count)
        for x in pairer.finish():
            yield exchange_row(x, capture=capture, decode_records=decode_records)
    except (CaptureError, DecodeError, OSError) as exc:
        for x in pairer.finish():
            yield exchange_row(x, capture=capture, decode_records=decode_records)
        yield _empty_row(last_ts, "undecodable", f"capture error: {exc}", capture)
    if progress is not None:
        progress(reader.packet_count)


# --- Arrow / Parquet -------------------------------------------------------------------------


def arrow_schema() -> Any:
    """The pyarrow schema of a row table (shared by the local CLI and Spark)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("ts", pa.timestamp("us", tz="UTC")),
            ("src", pa.string()),
            ("dst", pa.string()),
            ("connection_id", pa.int64()),
            ("api_key", pa.int32()),
            ("api_name", pa.string()),
            ("api_version", pa.int32()),
            ("correlation_id", pa.int32()),
            ("client_id", pa.string()),
            ("request", pa.string()),
            ("response", pa.string()),
            ("error_code", pa.int32()),
            ("latency_ms", pa.float64()),
            ("request_bytes", pa.int64()),
            ("response_bytes", pa.int64()),
            ("status", pa.string()),
            ("reason", pa.string()),
            ("topics", pa.list_(pa.string())),
            ("capture", pa.string()),
        ]
    )


def rows_to_arrow(rows: Iterable[Row], schema: Any = None) -> Any:
    """A pyarrow RecordBatch of rows (``ts`` as epoch seconds becomes a timestamp)."""
    import pyarrow as pa

    schema = schema if schema is not None else arrow_schema()
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for row in rows:
        for name in COLUMNS:
            columns[name].append(row.get(name))
    columns["ts"] = [None if t is None else round(t * 1_000_000) for t in columns["ts"]]
    arrays = [pa.array(columns[f.name], type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _batched(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def write_parquet(rows: Iterable[Row], path: str | os.PathLike[str], *, batch_size: int = 8192) -> int:
    """Stream rows into one Parquet file; returns the row count."""
    import pyarrow.parquet as pq

    schema = arrow_schema()
    count = 0
    with pq.ParquetWriter(os.fspath(path), schema) as writer:
        for batch in _batched(rows, batch_size):
            writer.write_batch(rows_to_arrow(batch, schema))
            count += len(batch)
    return count
