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

import binascii
import itertools
import json
import os
import secrets
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from json.encoder import (  # type: ignore[attr-defined]  # c_make_encoder is CPython's, unstubbed
    c_make_encoder,
    encode_basestring,  # the string escaper of json.dumps(ensure_ascii=False)
)
from typing import Any, BinaryIO

from kafkapy.capture.errors import CaptureError
from kafkapy.capture.events import TlsNote
from kafkapy.capture.filters import RowFilter
from kafkapy.capture.frames import TLS_BASIS, ConnectionClassified, Frame, FrameReader, Unframed
from kafkapy.capture.keylog import KeyLog
from kafkapy.capture.options import body_api_keys, port_numbers
from kafkapy.capture.pairing import Exchange, ExchangeStatus, Pairer, ProtocolDecoder
from kafkapy.capture.tcp import DEFAULT_KAFKA_PORTS, Connection, Endpoint
from kafkapy.errors import DecodeError
from kafkapy.protocol.codec import (
    RenderedRequest,
    RenderedResponse,
    decode_request_header,
    request_json_decoder,
    response_json_decoder,
)
from kafkapy.protocol.error_sites import ERROR_KEYS, body_errors
from kafkapy.protocol.json_decoder import RenderedBody
from kafkapy.protocol.records_json import records_json

__all__ = [
    "COLUMNS",
    "STATUSES",
    "RowDecoder",
    "arrow_schema",
    "decode_capture",
    "decode_capture_batches",
    "decode_capture_values",
    "exchange_row",
    "exchange_values",
    "gap_row",
    "gap_values",
    "rows_to_arrow",
    "to_json",
    "values_to_arrow",
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
    "errors",
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


def _row(values: tuple[Any, ...]) -> Row:
    """``dict(zip(COLUMNS, values))`` with the keys written out: a dict display is built at its
    full size at once, a quarter cheaper for 19 columns (0.62 against 0.85 us a row; measured
    before ``errors`` made 20)."""
    (ts, src, dst, connection_id, api_key, api_name, api_version, correlation_id, client_id, request,
     response, error_code, errors, latency_ms, request_bytes, response_bytes, status, reason, topics,
     capture) = values  # fmt: skip
    return {
        "ts": ts, "src": src, "dst": dst, "connection_id": connection_id, "api_key": api_key,
        "api_name": api_name, "api_version": api_version, "correlation_id": correlation_id,
        "client_id": client_id, "request": request, "response": response, "error_code": error_code,
        "errors": errors, "latency_ms": latency_ms, "request_bytes": request_bytes,
        "response_bytes": response_bytes, "status": status, "reason": reason, "topics": topics,
        "capture": capture,
    }  # fmt: skip


# --- JSON ------------------------------------------------------------------------------------


def _b64(data: bytes | bytearray | memoryview) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


# Record lists are written by records_json and spliced into the body's JSON
# in place of a marker string. The marker holds NUL characters (which JSON
# escapes) and a random nonce, so no string in a capture can pass for one.
_NONCE = secrets.token_hex(8)


class _BodyEncoder:
    """JSON for decoded bodies, one encoder reused (json.dumps builds one per call)."""

    def __init__(self, decode_records: bool) -> None:
        from kafkapy.protocol import Records

        self._records_type = Records
        self._decode_records = decode_records
        self._local = threading.local()
        self._encoder = json.JSONEncoder(default=self._default, separators=(",", ":"), ensure_ascii=False)
        # json.dumps(..., separators=(",", ":"), ensure_ascii=False, check_circular=False) without
        # the per-call set-up of JSONEncoder.iterencode, which builds a new C encoder every time (a
        # fifth of the cost of a small body). CPython's C encoder; JSONEncoder where there is none.
        self._iterencode = (
            None if c_make_encoder is None
            else c_make_encoder(None, self._default, encode_basestring, None, ":", ",", False, False, True)
        )  # fmt: skip

    def _default(self, value: Any) -> Any:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return _b64(value)
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, self._records_type):
            if self._decode_records:
                spliced: list[str] = self._local.spliced
                spliced.append(records_json(value))
                return f"\x00{_NONCE}:{len(spliced) - 1}\x00"
            return _b64(bytes(value))
        if isinstance(value, Mapping):
            return dict(value)
        if isinstance(value, (set, frozenset, tuple)):
            return list(value)
        return str(value)

    def encode(self, value: Any) -> str:
        spliced: list[str] = []
        self._local.spliced = spliced
        if self._iterencode is not None and not isinstance(value, str):
            text = "".join(self._iterencode(value, 0))
        else:
            text = self._encoder.encode(value)
        for i, fragment in enumerate(spliced):
            text = text.replace(f'"\\u0000{_NONCE}:{i}\\u0000"', fragment, 1)
        return text


_ENCODERS: dict[bool, _BodyEncoder] = {}


def to_json(value: Any, *, decode_records: bool = True) -> str:
    """A decoded body (or any value inside one) as compact JSON.

    bytes -> base64; UUID -> str; Records -> a list of ``Record.to_dict()``, each with its
    batch's header and control marker (``records_json``), when ``decode_records``, else base64
    of the raw batches.
    """
    encoder = _ENCODERS.get(decode_records)
    if encoder is None:
        encoder = _ENCODERS[decode_records] = _BodyEncoder(decode_records)
    return encoder.encode(value)


# --- rows ------------------------------------------------------------------------------------


class RowDecoder:
    """The pairing decoder of the rows (a :class:`~kafkapy.capture.pairing.ProtocolDecoder`): bodies
    are decoded straight to JSON by kafkapy.protocol's generated JSON decoders, so a row never
    builds a Body nor runs a generic JSON encoder. Its requests and responses carry a RenderedBody
    (text, error_code, topics) where kafkapy.protocol's carry a Body; pairing reads only their
    headers, and :func:`exchange_values` takes either."""

    def __init__(self, decode_records: bool = True) -> None:
        self.decode_records = decode_records
        # kafkapy.protocol's own header decoder: its one peek
        self.decode_request_header = decode_request_header
        # decode_request_json and decode_response_json, bound once: a call less per body
        self.decode_request: Callable[[bytes], RenderedRequest] = request_json_decoder(decode_records)
        self.decode_response: Callable[[bytes, int, int], RenderedResponse] = response_json_decoder(
            decode_records
        )


def _body_json(body: Any, decode_records: bool) -> str | None:
    if type(body) is RenderedBody:
        return body.text
    return None if body is None else to_json(body, decode_records=decode_records)


def _topics(body: Any) -> list[str] | None:
    """Topic names a request names at its top level (Produce's topic_data, most others' topics)."""
    if body is None:
        return None
    if type(body) is RenderedBody:
        return body.topics
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


def _errors(body: Any) -> list[dict[str, Any]] | None:
    """Every non-zero error code of a response body, placed (kafkapy.protocol.error_sites)."""
    if body is None:
        return None
    if type(body) is RenderedBody:
        return body.errors
    return body_errors(body)


def _error_code(body: Any) -> int | None:
    if body is None:
        return None
    if type(body) is RenderedBody:
        return body.error_code
    code = body.get("error_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


_ENDINGS = {
    "fin": "closed with FIN",
    "rst": "reset",
    "idle": "idle in the capture",
    "reused": "its ports were reused",
}


def _reason(x: Exchange) -> str | None:
    status = x.status
    if status == "ok":
        return None
    if status == "empty_response":
        return "the broker answered with only a correlation id (unknown or unsupported request)"
    if status == "no_response":
        if x.ended_by is not None:
            said = f"the connection ended ({_ENDINGS.get(x.ended_by, x.ended_by)}) before a response"
        else:
            said = "no response in the capture"
        if x.lost_after is not None:
            offset, length = x.lost_after
            side = "client" if x.server_initiated else "server"
            said += (f"; the capture lost {length} bytes of the {side} stream (at offset {offset}) after "
                     "the request: the response may have been among them")
        return said
    if status == "orphan_response":
        return "response to a request the capture does not have"
    parts: list[str] = []
    for name, frame in (("request", x.request_frame), ("response", x.response_frame)):
        if frame is not None and frame.truncated:
            why = "snap length" if frame.reason == "snaplen" else frame.reason
            parts.append(f"{name} frame truncated ({why}, {frame.missing} bytes missing)")
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


# Small caches for the per-row strings: a capture has few endpoints and APIs.
_ENDPOINTS: dict[Endpoint, str] = {}
_API_NAMES: dict[int, str] = {}
_CACHE_LIMIT = 65_536


def _endpoint(endpoint: Endpoint) -> str:
    if len(_ENDPOINTS) >= _CACHE_LIMIT:
        _ENDPOINTS.clear()
    text = _ENDPOINTS[endpoint] = str(endpoint)
    return text


# connection id -> (its endpoints, their texts by side). Ids repeat across captures, so an entry
# holds the very endpoints tuple it was made for (kept alive by it, so never mistaken for another).
_CONN_TEXTS: dict[int, tuple[tuple[Endpoint, Endpoint], str, str]] = {}


def _conn_texts(conn: Connection) -> tuple[tuple[Endpoint, Endpoint], str, str]:
    if len(_CONN_TEXTS) >= _CACHE_LIMIT:
        _CONN_TEXTS.clear()
    a, b = conn.endpoints
    texts = _CONN_TEXTS[conn.id] = (
        conn.endpoints,
        _ENDPOINTS.get(a) or _endpoint(a),
        _ENDPOINTS.get(b) or _endpoint(b),
    )
    return texts


def _api_name(api_key: int) -> str:
    from kafkapy.protocol import api_name

    if len(_API_NAMES) >= _CACHE_LIMIT:
        _API_NAMES.clear()
    name = _API_NAMES[api_key] = api_name(api_key)
    return name


def exchange_values(
    x: Exchange, *, capture: str | None = None, decode_records: bool = True
) -> tuple[Any, ...]:
    """The values of one Exchange's row, in :data:`COLUMNS` order (the columnar builders' unit)."""
    return _values(x, capture, decode_records)


def _values(x: Exchange, capture: str | None, decode_records: bool) -> tuple[Any, ...]:
    conn: Connection
    conn, status, request_frame, response_frame, header, request, response, _, _, _, _, _ = x  # one unpacking
    first = request_frame or response_frame
    texts = _CONN_TEXTS.get(conn.id)
    if texts is None or texts[0] is not conn.endpoints:
        texts = _conn_texts(conn)
    src = conn.client_side  # the side whose frame opened the exchange
    if first is not None and not first.from_client:
        src = 1 - src
    if header is not None:
        api_key: int | None = header.api_key
        api_version: int | None = header.api_version
        correlation_id: int | None = header.correlation_id
        client_id: str | None = header.client_id
    else:
        api_key, api_version, correlation_id, client_id = x.api_key, x.api_version, x.correlation_id, None
    if request is None and response is None:  # header rows (Pairer's ``bodies``), and most failures
        request_json = response_json = error_code = errors = topics = None
    else:
        # RowDecoder's bodies (RenderedBody) read in place; any other through the helpers
        request_body = request.body if request is not None else None
        if type(request_body) is RenderedBody:
            request_json, topics = request_body.text, request_body.topics
        else:
            request_json = _body_json(request_body, decode_records)
            topics = None if request_body is None else _topics(request_body)
        response_body = response.body if response is not None else None
        if type(response_body) is RenderedBody:
            response_json, error_code = response_body.text, response_body.error_code
            errors = response_body.errors
        else:
            response_json = _body_json(response_body, decode_records)
            error_code = _error_code(response_body)
            errors = _errors(response_body)
    if request_frame is not None and response_frame is not None:
        latency_ms: float | None = (response_frame.ts - request_frame.end_ts) * 1000.0
    else:
        latency_ms = None
    ok = status == "ok"
    return (
        first.ts if first is not None else conn.first_ts,
        texts[1 + src],
        texts[2 - src],
        conn.id,
        api_key,
        None if api_key is None else _API_NAMES.get(api_key) or _api_name(api_key),
        api_version,
        correlation_id,
        client_id,
        request_json,
        response_json,
        error_code,
        errors,
        latency_ms,
        None if request_frame is None else 4 + request_frame.size,
        None if response_frame is None else 4 + response_frame.size,
        "ok" if ok else _status(x),
        None if ok else _reason(x),
        topics,
        capture,
    )


def exchange_row(x: Exchange, *, capture: str | None = None, decode_records: bool = True) -> Row:
    """The row of one Exchange (see :data:`COLUMNS`)."""
    return _row(exchange_values(x, capture=capture, decode_records=decode_records))


def _empty_values(ts: float, status: str, reason: str, capture: str | None) -> tuple[Any, ...]:
    return (ts, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None,
            status, reason, None, capture)  # fmt: skip


def gap_values(u: Unframed, *, capture: str | None = None) -> tuple[Any, ...]:
    """The row values for stream bytes the capture does not have."""
    conn = u.conn
    from_client = conn.from_client(u.side)
    src, dst = (conn.client, conn.server) if from_client else (conn.server, conn.client)
    size = "an unknown number of" if u.length is None else str(u.length)
    reason = (
        f"{size} bytes missing from the {'client' if from_client else 'server'} stream at offset {u.offset}"
    )
    return (u.ts, str(src), str(dst), conn.id, None, None, None, None, None, None, None, None, None, None,
            None, None, "gap", reason, None, capture)  # fmt: skip


# The reason of a connection skipped because it is encrypted, without a key log...
TLS_REASON = (
    "TLS, no keys: the connection carries TLS records, so its Kafka traffic is encrypted (skipped; "
    "--tls-keylog with the clients' key log decrypts a connection whose handshake is in the capture)"
)
# ... and with one, for a connection the capture joined after its handshake (the TLS layer
# passes those on as they are: nothing tells it which keys they need).
TLS_JOINED_REASON = (
    "TLS, no keys: the capture joined the connection after its TLS handshake, whose client random "
    "names its secrets in the key log (skipped)"
)


def tls_values(
    event: ConnectionClassified | TlsNote, *, capture: str | None = None, reason: str = TLS_REASON
) -> tuple[Any, ...]:
    """The row values for a connection on a Kafka port that speaks TLS (seen at its start, or where
    the capture joined it), or for what the TLS layer could not decrypt: one row says why."""
    conn = event.conn
    status = "undecodable"
    if type(event) is TlsNote:
        status, reason = event.status, event.reason
    return (event.ts, str(conn.client), str(conn.server), conn.id, None, None, None, None, None, None,
            None, None, None, None, None, None, status, reason, None, capture)  # fmt: skip


def gap_row(u: Unframed, *, capture: str | None = None) -> Row:
    """A row for stream bytes the capture does not have."""
    return _row(gap_values(u, capture=capture))


# The row for a file that ends inside a record (a copy cut short, a capture still being
# written): its frames up to the cut are decoded, the cut frame is ``truncated``.
_CUT_REASON = "capture error: the file ends inside a record (cut short)"


def _file_cut(reader: FrameReader) -> bool:
    return reader.capture is not None and reader.capture.truncated


def decode_capture_values(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    kafka_ports: int | Iterable[int] = DEFAULT_KAFKA_PORTS,
    decode_records: bool = True,
    bodies: Iterable[int | str] | None = None,
    capture: str | None = None,
    progress: Callable[[int], None] | None = None,
    decoder: ProtocolDecoder | None = None,
    api: Iterable[int | str] | int | str | None = None,
    topic: str | Iterable[str] | None = None,
    client_id: str | Iterable[str] | None = None,
    errors_only: bool = False,
    row_filter: RowFilter | None = None,
    tls_keylog: str | os.PathLike[str] | KeyLog | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Like :func:`decode_capture`, each row as a tuple of values in :data:`COLUMNS` order.

    ``decoder``: the pairing decoder; by default a :class:`RowDecoder`, which writes each body's
    JSON directly. Any other (kafkapy.protocol itself, say) gives Bodies that :func:`to_json` writes.
    ``kafka_ports``, ``bodies`` and the filters are checked here, before the file is opened
    (ValueError). ``row_filter``: a :class:`~kafkapy.capture.filters.RowFilter` made by the
    caller (which counts the rows it saw), in place of ``api``, ``topic``, ``client_id`` and
    ``errors_only``. ``tls_keylog``: the clients' NSS key log (a path, or a KeyLog), to decrypt
    TLS connections; read here, so a missing file is a ValueError at the call, and so is a
    missing ``cryptography`` (an ImportError).
    """
    if capture is None and isinstance(source, (str, os.PathLike)):
        capture = os.fspath(source)
    if row_filter is None:
        row_filter = RowFilter(api=api, topic=topic, client_id=client_id, errors_only=errors_only)
    keylog = open_keylog(tls_keylog)
    values = _capture_values(source, port_numbers(kafka_ports), decode_records, body_api_keys(bodies),
                             capture, progress, decoder, keylog)
    return filter(row_filter, values) if row_filter.active else values


def _capture_values(
    source: str | os.PathLike[str] | BinaryIO, kafka_ports: tuple[int, ...], decode_records: bool,
    bodies: frozenset[int] | None, capture: str | None, progress: Callable[[int], None] | None,
    decoder: ProtocolDecoder | None, tls_keylog: KeyLog | None,
) -> Iterator[tuple[Any, ...]]:
    reader = FrameReader(source, kafka_ports=kafka_ports, tls_keylog=tls_keylog)
    tls_reason = TLS_REASON if tls_keylog is None else TLS_JOINED_REASON
    pairer = Pairer(decoder if decoder is not None else RowDecoder(decode_records), bodies=bodies)
    # Pairer.feed's two halves for a Frame, called straight with one list reused
    # (feed makes a list per frame and dispatches on the event's type)
    request, response, feed = pairer.add_request, pairer.add_response, pairer.feed
    values = _values
    out: list[Exchange] = []
    last: Frame | None = None  # the last frame read, whose time an error row takes
    try:
        n = 0
        for event in reader:
            if type(event) is Frame:
                if event.truncated and event.reason in ("gap", "snaplen") and _file_cut(reader):
                    # The bytes lost are those the file's last record was cut short of: the
                    # capture ended, the network lost nothing.
                    event = event._replace(reason="capture-end")
                last = event
                if event.from_client:
                    request(event, out)
                else:
                    response(event, out)
                if out:
                    if len(out) == 1:  # one exchange settled, as for nearly every frame that settles one
                        yield values(out.pop(), capture, decode_records)
                    else:
                        for x in out:
                            yield values(x, capture, decode_records)
                        out.clear()
            elif type(event) is ConnectionClassified:
                if event.basis == TLS_BASIS:
                    yield tls_values(event, capture=capture, reason=tls_reason)
            elif type(event) is TlsNote:
                yield tls_values(event, capture=capture)
            elif isinstance(event, Unframed):
                # length None: joined mid-stream, a gap before the first byte (not news); bytes
                # missing once the file was cut are the cut, reported by the row below instead
                if event.reason == "missing" and event.length is not None and not _file_cut(reader):
                    pairer.lost(event)
                    yield gap_values(event, capture=capture)
            else:
                for x in feed(event):
                    yield values(x, capture, decode_records)
            if progress is not None:
                n += 1
                if n % 4096 == 0:
                    progress(reader.packet_count)
        for x in pairer.finish():
            yield values(x, capture, decode_records)
        if _file_cut(reader):
            last_ts = 0.0 if last is None else last.ts
            yield _empty_values(last_ts, "undecodable", _CUT_REASON, capture)
    except (CaptureError, DecodeError, OSError) as exc:
        for x in pairer.finish():
            yield values(x, capture, decode_records)
        last_ts = 0.0 if last is None else last.ts
        yield _empty_values(last_ts, "undecodable", f"capture error: {exc}", capture)
    if progress is not None:
        progress(reader.packet_count)


def open_keylog(tls_keylog: str | os.PathLike[str] | KeyLog | None) -> KeyLog | None:
    """``tls_keylog`` read (a KeyLogError, a ValueError, if it cannot be), after checking that the
    AEAD it needs is installed (AeadMissing, an ImportError, if not)."""
    if tls_keylog is None:
        return None
    from kafkapy.capture.tls_keys import require_aead

    require_aead()
    return tls_keylog if isinstance(tls_keylog, KeyLog) else KeyLog(tls_keylog)


def decode_capture(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    kafka_ports: int | Iterable[int] = DEFAULT_KAFKA_PORTS,
    decode_records: bool = True,
    bodies: Iterable[int | str] | None = None,
    capture: str | None = None,
    progress: Callable[[int], None] | None = None,
    api: Iterable[int | str] | int | str | None = None,
    topic: str | Iterable[str] | None = None,
    client_id: str | Iterable[str] | None = None,
    errors_only: bool = False,
    row_filter: RowFilter | None = None,
    tls_keylog: str | os.PathLike[str] | KeyLog | None = None,
) -> Iterator[Row]:
    """Every row of one capture file, streamed (memory bounded by open connections).

    A file that is not a capture, or that breaks off, ends with an
    ``undecodable`` row saying why rather than an exception. ``progress`` is
    called now and then with the count of packets read so far. ``bodies``
    limits body decoding to those APIs, by key or name as ``--bodies`` takes
    them (see :class:`Pairer`); the other rows have no request, response,
    error_code or topics. A port outside 1-65535, or an API kafkapy does not
    know, is a ValueError at the call, before the file is read.

    ``api``, ``topic``, ``client_id`` and ``errors_only`` keep only the rows that pass them all
    (:mod:`kafkapy.capture.filters`, as ``kafkapy decode``'s options of those names); a bad value
    is a ValueError at the call too. ``tls_keylog`` (``--tls-keylog``) names the clients' key log,
    which decrypts TLS connections whose handshake the capture holds.
    """
    return map(_row, decode_capture_values(
        source, kafka_ports=kafka_ports, decode_records=decode_records, bodies=bodies, capture=capture,
        progress=progress, api=api, topic=topic, client_id=client_id, errors_only=errors_only,
        row_filter=row_filter, tls_keylog=tls_keylog,
    ))  # fmt: skip


# --- Arrow / Parquet -------------------------------------------------------------------------


def error_type() -> Any:
    """The pyarrow struct of one ``errors`` entry: every site key (null where the API has none)."""
    import pyarrow as pa

    kinds = {"partition": pa.int32(), "code": pa.int32()}
    return pa.struct([(key, kinds.get(key, pa.string())) for key in ERROR_KEYS])


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
            ("errors", pa.list_(error_type())),
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


def values_to_arrow(values: list[tuple[Any, ...]], schema: Any = None) -> Any:
    """A pyarrow RecordBatch of row value tuples (see :func:`exchange_values`).

    The tuples are read by pyarrow as one struct array, so no Python loop
    touches a value (a third cheaper than transposing them with zip: 0.53
    against 0.84 us a row); ``ts`` goes in as float seconds and becomes
    microseconds in Arrow, rounded half to even as Python's round() does.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = schema if schema is not None else arrow_schema()
    ts_type = schema.field("ts").type
    struct = pa.struct([pa.field("ts", pa.float64()), *list(schema)[1:]])
    columns = pa.array(values, type=struct).flatten()
    micros = pc.round(pc.multiply(columns[0], 1_000_000.0), round_mode="half_to_even")
    columns[0] = micros.cast(pa.int64()).view(ts_type)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def decode_capture_batches(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    batch_rows: int = 8192,
    schema: Any = None,
    **options: Any,
) -> Iterator[Any]:
    """:func:`decode_capture` as pyarrow RecordBatches of up to ``batch_rows`` rows (no dict per row)."""
    schema = schema if schema is not None else arrow_schema()
    values = decode_capture_values(source, **options)
    while batch := list(itertools.islice(values, batch_rows)):
        yield values_to_arrow(batch, schema)


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
