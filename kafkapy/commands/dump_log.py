"""``kafkapy dump-log``: print what a partition's files hold, like kafka-dump-log.sh.

The files are Kafka's (a broker's ``log.dirs``, or kafkapy's own, which are laid out the same):
``.log`` segments batch by batch (and record by record with ``--deep-iteration`` or
``--print-data-log``), ``.index`` and ``.timeindex`` entries checked against their segment,
``.snapshot`` producer state and ``.txnindex`` aborted transactions. Lines have the shape
DumpLogSegments prints, so what was written to read its output reads this; ``--json`` prints one
object per line instead, with every field by name, for scripts.

Nothing here trusts a file: a batch that does not frame or decode ends that file's dump with one
line on stderr saying where, and the next file is dumped; bytes after the last whole batch are
counted ("Found N invalid bytes at the end"), as Kafka's recovery would truncate them.
``--offsets-decoder`` shows ``__consumer_offsets`` records decoded, ``--transaction-log-decoder``
``__transaction_state``'s and ``--share-group-state-decoder`` ``__share_group_state``'s, through the
same codecs the broker writes them with.
"""

from __future__ import annotations

import argparse
import itertools
import json
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs

from kafkapy.errors import DecodeError
from kafkapy.groups.record_codec import GroupRecordError, record_json
from kafkapy.log.producer_state import (
    ABORT,
    COMMIT,
    CONTROL_RECORD_KEY,
    END_TXN_MARKER_VALUE,
    CorruptSnapshotError,
    decode_snapshot,
    increment_sequence,
)
from kafkapy.log.txn_index import decode_entries
from kafkapy.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    LegacyBatch,
    Record,
    RecordBatch,
    Records,
    entry_end,
)
from kafkapy.sharestate.records import ShareStateRecordError
from kafkapy.sharestate.records import decode_record as decode_share_state
from kafkapy.sharestate.state import RecordType
from kafkapy.store.base import encode_uuid
from kafkapy.transactions.records import TransactionLogError, decode_key, decode_value

__all__ = ["register"]

_TIMESTAMP_TYPES = {CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}
_NO_TIMESTAMP_TYPE = "NoTimestampType"
# ControlRecordType by id; only ABORT and COMMIT carry an EndTransactionMarker value.
_CONTROL_TYPES = {ABORT: "ABORT", COMMIT: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                  4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
_OFFSET_ENTRY = struct.Struct(">ii")  # .index: relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # .timeindex: timestamp, relative offset
_NO_SEQUENCE = -1
_RECORD_INDENT = "|"
_MAX_BYTES = 2**31 - 1
T = TypeVar("T")  # Kafka's default --max-bytes: the whole file


@attrs.frozen
class Line:
    """One printed line: ``fields`` in the order Kafka prints them, or ``message`` for a line of
    prose (an empty index, a sanity verdict); ``record`` marks a record under its batch."""

    fields: dict[str, Any] = attrs.field(factory=dict)
    message: str | None = None
    record: bool = False

Decoder = Callable[[Record], tuple[str | None, str | None]]


class _FileError(Exception):
    """A file that cannot be read or walked further: one line on stderr, then the next file."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dump-log", help="print the batches, records, indexes and producer state of log files "
                         "(kafka-dump-log.sh)",
        description="Dump Kafka's partition files: .log segments, .index, .timeindex, .snapshot and "
                    ".txnindex, in DumpLogSegments' line format.")
    parser.add_argument("--files", required=True, metavar="FILE[,FILE...]",
                        help="the data and index files to dump, comma-separated")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print each record's key and value too (implies --deep-iteration)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="one line per record, not only per batch")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="with --print-data-log: only the key and the value of each record")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="check .index and .timeindex entries against the segment without printing them")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check that .index and .timeindex files are well formed")
    parser.add_argument("--max-bytes", type=int, default=2**31 - 1, metavar="N",
                        help="read at most this many bytes of each .log file")
    decoders = parser.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="decode records as __consumer_offsets' (implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="decode records as __transaction_state's (implies --print-data-log)")
    decoders.add_argument("--share-group-state-decoder", action="store_true",
                          help="decode records as __share_group_state's (implies --print-data-log)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of text")
    parser.set_defaults(func=_run)


# --- segments ----------------------------------------------------------------------------------------

def _batch_line(batch: RecordBatch | LegacyBatch, position: int) -> Line:
    timestamp_type = _TIMESTAMP_TYPES.get(batch.timestamp_type, _NO_TIMESTAMP_TYPE)
    if isinstance(batch, RecordBatch):
        last_sequence = (_NO_SEQUENCE if batch.base_sequence == _NO_SEQUENCE
                         else increment_sequence(batch.base_sequence, batch.last_offset_delta))
        fields: dict[str, Any] = {
            "baseOffset": batch.base_offset, "lastOffset": batch.last_offset, "count": batch.record_count,
            "baseSequence": batch.base_sequence, "lastSequence": last_sequence,
            "producerId": batch.producer_id, "producerEpoch": batch.producer_epoch,
            "partitionLeaderEpoch": batch.partition_leader_epoch, "isTransactional": batch.is_transactional,
            "isControl": batch.is_control,
            "deleteHorizonMs": batch.base_timestamp if batch.has_delete_horizon else None,
        }
        timestamp = batch.max_timestamp
    else:
        fields = {"offset": batch.last_offset}
        timestamp = batch.timestamp if batch.timestamp is not None else -1
    return Line({**fields, "position": position, timestamp_type: timestamp, "size": batch.size_in_bytes,
                 "magic": batch.magic, "compresscodec": batch.compression.name.lower(), "crc": batch.crc,
                 "isvalid": batch.crc_valid})


def _control(record: Record) -> dict[str, Any]:
    key = record.key or b""
    if len(key) < CONTROL_RECORD_KEY.size:
        return {"controlType": "UNKNOWN(-1)"}
    control_type = CONTROL_RECORD_KEY.unpack_from(key)[1]
    if control_type in (ABORT, COMMIT) and record.value and len(record.value) >= END_TXN_MARKER_VALUE.size:
        coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(record.value)[1]
        return {"endTxnMarker": _CONTROL_TYPES[control_type], "coordinatorEpoch": coordinator_epoch}
    return {"controlType": f"{_CONTROL_TYPES.get(control_type, 'UNKNOWN')}({control_type})"}


def _record_line(batch: RecordBatch | LegacyBatch, record: Record, args: argparse.Namespace,
                 decode: Decoder) -> Line:
    line: dict[str, Any] = {}
    if not args.skip_record_metadata:
        timestamp_type = _TIMESTAMP_TYPES.get(batch.timestamp_type, _NO_TIMESTAMP_TYPE)
        timestamp = record.timestamp if record.timestamp is not None else -1
        line = {"offset": record.offset, timestamp_type: timestamp,
                "keySize": -1 if record.key is None else len(record.key),
                "valueSize": -1 if record.value is None else len(record.value)}
        if isinstance(batch, RecordBatch):
            delta = record.offset - batch.base_offset
            line["sequence"] = (_NO_SEQUENCE if batch.base_sequence == _NO_SEQUENCE
                                else increment_sequence(batch.base_sequence, delta))
            line["headerKeys"] = [key for key, _ in record.headers]
            if batch.is_control:
                line.update(_control(record))
    if args.print_data_log and not (isinstance(batch, RecordBatch) and batch.is_control):
        key, payload = decode(record)
        if key is not None:
            line["key"] = key
        if payload is not None:
            line["payload"] = payload
    return Line(line, record=True)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", errors="replace")  # Kafka's StringDecoder


def _plain(record: Record) -> tuple[str | None, str | None]:
    return _text(record.key), _text(record.value)


def _offsets(record: Record) -> tuple[str | None, str | None]:
    """__consumer_offsets: key and value as JSON, type and version as strings as Kafka prints them."""
    if record.key is None:
        return f"Error at offset {record.offset}, skipping. The record has no key", None
    try:
        decoded = record_json(record.key, record.value, consumer_protocol=True)
    except GroupRecordError as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None
    key = {"type": str(decoded["key"]["type"]), "data": decoded["key"]["data"]}
    value = decoded["value"]
    payload = "<DELETE>" if value is None else json.dumps(
        {"version": str(value["version"]), "data": value["data"]}, separators=(",", ":"))
    return json.dumps(key, separators=(",", ":")), payload


def _transactions(record: Record) -> tuple[str | None, str | None]:
    """__transaction_state: Kafka's TransactionLog.formatRecordKeyAndValue lines."""
    if record.key is None:
        return f"Error at offset {record.offset}, skipping. The record has no key", None
    try:
        transactional_id = decode_key(record.key)
        metadata = decode_value(transactional_id, record.value)
    except (TransactionLogError, DecodeError) as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None
    key = f"transaction_metadata::transactionalId={transactional_id}"
    if metadata is None:
        return key, "<DELETE>"
    partitions = ",".join(f"{topic}-{partition}" for topic, partition in sorted(metadata.partitions))
    return key, (f"producerId:{metadata.producer_id},producerEpoch:{metadata.producer_epoch},"
                 f"state={metadata.state.kafka_name},partitions=[{partitions}],"
                 f"txnLastUpdateTimestamp={metadata.last_update_ms},txnTimeoutMs={metadata.timeout_ms}")


def _share_state(record: Record) -> tuple[str | None, str | None]:
    """__share_group_state: key and value as JSON (Kafka's field names), type and version as
    strings, as Kafka's share group state formatter prints them."""
    if record.key is None:
        return f"Error at offset {record.offset}, skipping. The record has no key", None
    try:
        decoded = decode_share_state(record.key, record.value)
    except ShareStateRecordError as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None
    group_id, topic_id, partition = decoded.key
    key = {"type": str(int(decoded.kind)),
           "data": {"groupId": group_id, "topicId": encode_uuid(topic_id), "partition": partition}}
    state = decoded.value
    if state is None:
        return json.dumps(key, separators=(",", ":")), "<DELETE>"
    data: dict[str, Any] = {"snapshotEpoch": state.snapshot_epoch}
    if decoded.kind is RecordType.SNAPSHOT:
        data["stateEpoch"] = state.state_epoch
    data |= {"leaderEpoch": state.leader_epoch, "startOffset": state.start_offset,
             "stateBatches": [{"firstOffset": b.first_offset, "lastOffset": b.last_offset,
                               "deliveryState": b.delivery_state, "deliveryCount": b.delivery_count}
                              for b in state.batches]}
    return (json.dumps(key, separators=(",", ":")),
            json.dumps({"version": "0", "data": data}, separators=(",", ":")))


def _dump_segment(path: Path, args: argparse.Namespace, warnings: list[str]) -> Iterator[Line]:
    yield Line(message=f"Log starting offset: {_base_offset(path)}")
    data = _read(path)[: args.max_bytes]
    decode = (_offsets if args.offsets_decoder else _transactions if args.transaction_log_decoder
              else _share_state if args.share_group_state_decoder else _plain)
    deep = args.deep_iteration or args.print_data_log
    position = 0
    previous: int | None = None
    gaps: list[tuple[int, int]] = []
    try:
        for batch in Records(data).batches():
            yield _batch_line(batch, position)
            if deep:
                for record in batch.record_list(check_crc=False):
                    if previous is not None and record.offset != previous + 1:
                        gaps.append((previous, record.offset))
                    previous = record.offset
                    yield _record_line(batch, record, args, decode)
            position += batch.size_in_bytes
    except DecodeError as exc:
        raise _FileError(f"{path}: cannot read the batch at position {position}: {exc}") from None
    trailing = len(data) - position
    if trailing > 0 and args.max_bytes == _MAX_BYTES:
        yield Line({"invalidBytes": trailing},
                   message=f"Found {trailing} invalid bytes at the end of {path.name}")
    if gaps:
        warnings.append(f"Non-consecutive offsets in {path.resolve()}")
        warnings.extend(f"  {first} is followed by {second}" for first, second in gaps)


# --- indexes -------------------------------------------------------------------------------------------

def _segment_batches(index_path: Path) -> tuple[bytes, Path]:
    log_path = index_path.with_suffix(".log")
    return _read(log_path), log_path


def _batch_at(data: bytes, position: int) -> RecordBatch | LegacyBatch | None:
    """The batch that starts at ``position`` of a segment, or None if none does."""
    if position < 0 or position >= len(data):
        return None
    try:
        if entry_end(data, position, len(data)) is None:
            return None
        return next(iter(Records(memoryview(data)[position:]).batches()), None)
    except DecodeError:  # the position is not where a batch starts
        return None


def _entries(path: Path, entry: struct.Struct) -> list[tuple[int, int]]:
    data = _read(path)
    if len(data) % entry.size:
        raise _FileError(f"{path}: {len(data)} bytes is not a whole number of {entry.size}-byte entries")
    return [entry.unpack_from(data, at) for at in range(0, len(data), entry.size)]


def _dump_offset_index(path: Path, args: argparse.Namespace, warnings: list[str]) -> Iterator[Line]:
    base = _base_offset(path)
    entries = _entries(path, _OFFSET_ENTRY)
    if not entries:
        yield Line(message=f"{path} is empty.")
        return
    if args.index_sanity_check:
        _check_increasing(path, [base + relative for relative, _ in entries], base)
        yield Line(message=f"{path} passed sanity check.")
        return
    segment, _ = _segment_batches(path)
    mismatches = []
    for i, (relative, position) in enumerate(entries):
        if relative == 0 and i > 0:
            break  # the zeroed tail of a preallocated index that was not trimmed (a crash)
        batch = _batch_at(segment, position)
        found = -1 if batch is None else batch.last_offset
        if found != base + relative:
            mismatches.append((base + relative, found))
        if not args.verify_index_only:
            yield Line({"offset": base + relative, "position": position})
    if mismatches:
        warnings.append(f"Mismatches in :{path.resolve()}")
        warnings.extend(f"  Index offset: {indexed}, log offset: {found}" for indexed, found in mismatches)


def _dump_time_index(path: Path, args: argparse.Namespace, warnings: list[str]) -> Iterator[Line]:
    base = _base_offset(path)
    entries = _entries(path, _TIME_ENTRY)
    if args.index_sanity_check:
        _check_increasing(path, [base + relative for _, relative in entries], base)
        yield Line(message=f"{path} passed sanity check.")
        return
    segment, _ = _segment_batches(path)
    batches = list(Records(segment).batches()) if segment else []
    previous = -1
    for i, (timestamp, relative) in enumerate(entries):
        if relative == 0 and i > 0:
            break
        offset = base + relative
        batch = next((b for b in batches if b.last_offset >= offset), None)
        if batch is None or batch.last_offset != offset:
            warnings.append(f"The indexed offset {offset} of {path.resolve()} is not a batch's last offset "
                            f"in the log (found {-1 if batch is None else batch.last_offset}).")
        else:
            newest = max((r.timestamp for r in batch.record_list(check_crc=False) if r.timestamp is not None),
                         default=-1)
            if newest != timestamp:
                warnings.append(f"Found timestamp mismatch in :{path.resolve()}: index timestamp "
                                f"{timestamp}, log timestamp {newest}")
            if previous >= timestamp:
                warnings.append(f"Found out of order timestamp in :{path.resolve()}: index timestamp "
                                f"{timestamp}, previously indexed timestamp {previous}")
        if not args.verify_index_only:
            yield Line({"timestamp": timestamp, "offset": offset})
        previous = timestamp


def _check_increasing(path: Path, offsets: list[int], base: int) -> None:
    """Kafka's index sanity: whole entries (checked on reading), offsets after the base, increasing."""
    for earlier, later in itertools.pairwise(offsets):
        if later <= earlier and later != base:
            raise _FileError(f"Corrupt index found, index file ({path}) has entries out of order: "
                             f"{later} after {earlier}")
    if offsets and offsets[-1] < base:
        raise _FileError(f"Corrupt index found, index file ({path}) has a last offset {offsets[-1]} "
                         f"below its base offset {base}")


# --- producer state and aborted transactions -----------------------------------------------------------

def _decoded(path: Path, decode: Callable[[bytes], list[T]], errors: type[Exception]) -> list[T]:
    """A whole small file's entries; a file its decoder refuses is one _FileError."""
    try:
        return decode(_read(path))
    except errors as exc:
        raise _FileError(f"{path}: {exc}") from None


def _dump_snapshot(path: Path, args: argparse.Namespace, warnings: list[str]) -> Iterator[Line]:
    for entry in _decoded(path, decode_snapshot, CorruptSnapshotError):
        line: dict[str, Any] = {
            "producerId": entry.producer_id, "producerEpoch": entry.producer_epoch,
            "coordinatorEpoch": entry.coordinator_epoch,
            "currentTxnFirstOffset": entry.current_txn_first_offset, "lastTimestamp": entry.last_timestamp}
        if entry.batches:
            first = entry.batches[0]
            line.update({"firstSequence": first.first_seq, "lastSequence": first.last_seq,
                         "lastOffset": first.last_offset, "offsetDelta": first.offset_delta,
                         "timestamp": first.timestamp})
        yield Line(line)


def _dump_txn_index(path: Path, args: argparse.Namespace, warnings: list[str]) -> Iterator[Line]:
    for txn in _decoded(path, decode_entries, DecodeError):
        yield Line({"version": 0, "producerId": txn.producer_id, "firstOffset": txn.first_offset,
                    "lastOffset": txn.last_offset, "lastStableOffset": txn.last_stable_offset})


_DUMPERS: dict[str, Callable[[Path, argparse.Namespace, list[str]], Iterator[Line]]] = {
    ".log": _dump_segment,
    ".index": _dump_offset_index,
    ".timeindex": _dump_time_index,
    ".snapshot": _dump_snapshot,
    ".txnindex": _dump_txn_index,
}


# --- files and output ----------------------------------------------------------------------------------

def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _FileError(f"{path}: {exc.strerror or exc}") from None


def _base_offset(path: Path) -> int:
    stem = path.name.split(".")[0]
    if not stem.isdecimal():
        raise _FileError(f"{path}: not named by its base offset (20 digits, as Kafka names segment files)")
    return int(stem)


def _java(value: Any, key: str) -> str:
    """A value as the JVM prints it in DumpLogSegments' lines."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    if value is None:
        return "OptionalLong.empty" if key == "deleteHorizonMs" else "Optional.empty"
    if key == "deleteHorizonMs":
        return f"OptionalLong[{value}]"
    if key == "currentTxnFirstOffset":
        return f"Optional[{value}]"
    return str(value)


def _as_text(line: Line) -> str:
    if line.message is not None:
        return line.message
    text = " ".join(f"{key}: {_java(value, key)}" for key, value in line.fields.items())
    return f"{_RECORD_INDENT} {text}" if line.record else text


def _as_json(line: Line, path: Path) -> str:
    if line.record:
        return json.dumps({"file": str(path), "record": line.fields})
    if not line.fields:
        return json.dumps({"file": str(path), "message": line.message})
    return json.dumps({"file": str(path), **line.fields})


def _run(args: argparse.Namespace) -> int:
    if args.offsets_decoder or args.transaction_log_decoder or args.share_group_state_decoder:
        args.print_data_log = True  # as Kafka: a decoder means printing the data
    if args.max_bytes <= 0:
        print("kafkapy dump-log: --max-bytes must be positive", file=sys.stderr)
        return 2
    failed = False
    for name in (n.strip() for n in args.files.split(",") if n.strip()):
        path = Path(name)
        warnings: list[str] = []
        if not args.json:
            print(f"Dumping {path}")
        dumper = _DUMPERS.get(path.suffix)
        if dumper is None:
            print(f"Ignoring unknown file {path}", file=sys.stderr)
            continue
        try:
            for line in dumper(path, args, warnings):
                print(_as_json(line, path) if args.json else _as_text(line))
        except _FileError as exc:
            print(f"kafkapy dump-log: {exc}", file=sys.stderr)
            failed = True
        for warning in warnings:
            print(warning, file=sys.stderr)
    return 1 if failed else 0
