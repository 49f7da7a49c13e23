"""AddPartitionsToTxn and EndTxn answered straight from the frame: a transactional producer's two
coordinator requests of every transaction, without the schema codec, the request objects or the
dispatcher's plan.

A committed transaction is four round trips (AddPartitionsToTxn, a Produce per partition leader,
EndTxn), and the client waits on each; on the plain path each coordinator request is decoded into
dicts, given a RequestContext, stepped as a coroutine, fitted and encoded again, around a handful
of checks and one ``__transaction_state`` append. This path reads the request with ``struct`` at
known offsets and writes the answer's bytes itself; everything in between (authorization,
outages, unknown partitions, the coordinator's rules and its writes) is the plain path's own code
(``TransactionsModule.add_codes`` and ``end_refusal``, ``TransactionCoordinator``), so the two can
only differ in reading and wording, which tests/transactions/test_txn_from_frame.py holds byte-equal
over generated requests, good and bad.

Theory of operation
-------------------
1. **Read** the header (the correlation id; the client id skipped; on flexible versions, an empty
   tag section) and the body, which must end where the frame ends and carry no tagged fields.
   Strings are read as the codec reads them (as Java reads them: kafkapy.protocol.strings).
2. **Answer** with the shared code. AddPartitionsToTxn (v0-v3: one transaction) never waits.
   EndTxn waits only when a partition of the transaction is led by another broker (its marker is
   tried before the answer): ``TransactionCoordinator.end_transaction_now`` then declines before
   anything is written, and the plain path takes the frame (and asks the authorizer again).
3. **Write** the response: the size, the correlation id, the header's tag section on flexible
   versions, then the body.

Anything else returns None before step 2, and the dispatcher hands the frame to the plain path,
which decides it from scratch. The dispatcher offers a frame only when nothing watches or wraps the
request (kafkapy.server.dispatch: no observers, module hooks or applying interceptors).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.framing import ReceivedFrame
from kafkapy.protocol.primitives import read_uvarint, uvarint_bytes
from kafkapy.protocol.strings import JAVA_REPLACE
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.modules import FromFrame
from kafkapy.transactions.answers import by_topic, for_version
from kafkapy.transactions.metadata import TopicPartition

__all__ = ["ADD_PARTITIONS_VERSIONS", "END_TXN_VERSIONS", "TxnFromFrame"]

ADD_PARTITIONS_VERSIONS = range(0, 4)  # v4+ is the brokers' batched form: the plain path's
END_TXN_VERSIONS = range(0, 5)  # every version served
_FIRST_FLEXIBLE = 3  # both APIs' first flexible version (KIP-482)
_HEADER_END = 10  # api key, version, correlation id, the client id's int16 length
_THROTTLE_NONE = b"\x00\x00\x00\x00"

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_ID_AND_EPOCH = struct.Struct(">qh").unpack_from
_PARTITION = struct.Struct(">i").unpack_from
_SIZE = struct.Struct(">i").pack
_CORRELATION = struct.Struct(">i")
_I16_PACK = struct.Struct(">h").pack
_I32_PACK = struct.Struct(">i").pack
_RESULT = struct.Struct(">ih").pack  # partition index, error code
_ERROR = struct.Struct(">h").pack

Codes = dict[TopicPartition, ErrorCode]
AddCodes = Callable[[ConnectionInfo, str, int, int, list[TopicPartition], bool], Codes]
EndRefusal = Callable[[ConnectionInfo, str], ErrorCode | None]
EndNow = Callable[[str, int, int, bool], ErrorCode | None]


class _Unusual(Exception):
    """Not the common shape: the plain path takes the frame."""


def _uvarint(frame: ReceivedFrame, pos: int) -> tuple[int, int]:
    """Kafka's unsigned varint at ``pos``: (value, the position after it)."""
    try:
        return read_uvarint(frame, pos, len(frame), "length")
    except DecodeError:
        raise _Unusual from None


def _body_start(frame: ReceivedFrame, flexible: bool) -> int:
    """Where the body starts: after the client id and, on flexible versions, an empty tag section."""
    n: int = _I16(frame, 8)[0]
    if n < -1:
        raise _Unusual
    return _no_tags(frame, _HEADER_END + max(n, 0), flexible)


def _length(frame: ReceivedFrame, pos: int, flexible: bool, fixed: Callable[[ReceivedFrame, int], tuple[int]],
            width: int) -> tuple[int, int]:
    """A length as both APIs write it: an unsigned varint of length + 1 on flexible versions, else
    ``fixed`` (``width`` bytes); (length, the position after it)."""
    if flexible:
        n, pos = _uvarint(frame, pos)
        return n - 1, pos
    return fixed(frame, pos)[0], pos + width


def _no_tags(frame: ReceivedFrame, pos: int, flexible: bool) -> int:
    """Past an empty tag section on flexible versions (tagged fields are the plain path's)."""
    if not flexible:
        return pos
    if frame[pos] != 0:
        raise _Unusual
    return pos + 1


def _string(frame: ReceivedFrame, pos: int, flexible: bool) -> tuple[str, int]:
    """A non-null string (compact on flexible versions): (value, the position after it)."""
    n, pos = _length(frame, pos, flexible, _I16, 2)
    if n < 0 or pos + n > len(frame):
        raise _Unusual
    return str(frame[pos:pos + n], "utf-8", JAVA_REPLACE), pos + n


def _count(frame: ReceivedFrame, pos: int, flexible: bool) -> tuple[int, int]:
    """A non-null array's length (compact on flexible versions): (length, the position after it)."""
    n, pos = _length(frame, pos, flexible, _I32, 4)
    if n < 0:
        raise _Unusual
    return n, pos


def read_add_partitions(frame: ReceivedFrame,
                        api_version: int) -> tuple[int, str, int, int, list[TopicPartition]]:
    """AddPartitionsToTxn v0-v3: (correlation id, transactional id, producer id, epoch, the
    partitions in request order); _Unusual for anything else (IndexError or struct.error for a
    frame cut short)."""
    flexible = api_version >= _FIRST_FLEXIBLE
    pos = _body_start(frame, flexible)
    transactional_id, pos = _string(frame, pos, flexible)
    producer_id, epoch = _ID_AND_EPOCH(frame, pos)
    topics, pos = _count(frame, pos + 10, flexible)
    partitions: list[TopicPartition] = []
    for _ in range(topics):
        name, pos = _string(frame, pos, flexible)
        count, pos = _count(frame, pos, flexible)
        for _ in range(count):
            partitions.append((name, _PARTITION(frame, pos)[0]))
            pos += 4
        pos = _no_tags(frame, pos, flexible)
    pos = _no_tags(frame, pos, flexible)
    if pos != len(frame):
        raise _Unusual
    return _CORRELATION.unpack_from(frame, 4)[0], transactional_id, producer_id, epoch, partitions


def read_end_txn(frame: ReceivedFrame, api_version: int) -> tuple[int, str, int, int, bool]:
    """EndTxn v0-v4: (correlation id, transactional id, producer id, epoch, committed)."""
    flexible = api_version >= _FIRST_FLEXIBLE
    transactional_id, pos = _string(frame, _body_start(frame, flexible), flexible)
    producer_id, epoch = _ID_AND_EPOCH(frame, pos)
    committed = frame[pos + 10]
    if committed > 1:
        raise _Unusual
    pos += 11
    pos = _no_tags(frame, pos, flexible)
    if pos != len(frame):
        raise _Unusual
    return _CORRELATION.unpack_from(frame, 4)[0], transactional_id, producer_id, epoch, committed == 1


def write_add_partitions(correlation_id: int, api_version: int, codes: Codes) -> bytes:
    """AddPartitionsToTxnResponse v0-v3 on the wire, size first, the codes worded for the version."""
    flexible = api_version >= _FIRST_FLEXIBLE
    grouped = by_topic(codes)
    parts = [_CORRELATION.pack(correlation_id), b"\x00" if flexible else b"", _THROTTLE_NONE,
             uvarint_bytes(len(grouped) + 1) if flexible else _I32_PACK(len(grouped))]
    for topic, results in grouped:
        name = topic.encode("utf-8", "surrogateescape")
        parts.append(uvarint_bytes(len(name) + 1) if flexible else _I16_PACK(len(name)))
        parts.append(name)
        parts.append(uvarint_bytes(len(results) + 1) if flexible else _I32_PACK(len(results)))
        for partition, code in results:
            parts.append(_RESULT(partition, for_version(ApiKey.ADD_PARTITIONS_TO_TXN, api_version, code)))
            if flexible:
                parts.append(b"\x00")
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    body = b"".join(parts)
    return _SIZE(len(body)) + body


def write_end_txn(correlation_id: int, api_version: int, code: ErrorCode) -> bytes:
    """EndTxnResponse v0-v4 on the wire, size first."""
    error = _ERROR(for_version(ApiKey.END_TXN, api_version, code))
    if api_version >= _FIRST_FLEXIBLE:
        return b"".join((_SIZE(12), _CORRELATION.pack(correlation_id), b"\x00", _THROTTLE_NONE, error,
                         b"\x00"))
    return b"".join((_SIZE(10), _CORRELATION.pack(correlation_id), _THROTTLE_NONE, error))


class TxnFromFrame:
    """Per version, the frame answerers of AddPartitionsToTxn and EndTxn (``ApiHandler.from_frame``)."""

    def __init__(self, add_codes: AddCodes, end_refusal: EndRefusal, end_now: EndNow) -> None:
        self.add_codes = add_codes  # TransactionsModule.add_codes
        self.end_refusal = end_refusal  # TransactionsModule.end_refusal
        self.end_now = end_now  # TransactionCoordinator.end_transaction_now

    def add_partitions(self, api_version: int) -> FromFrame | None:
        if api_version not in ADD_PARTITIONS_VERSIONS:
            return None
        add_codes = self.add_codes

        def answer(conn: ConnectionInfo, frame: ReceivedFrame) -> bytes | None:
            try:
                correlation_id, transactional_id, producer_id, epoch, partitions = \
                    read_add_partitions(frame, api_version)
            except (_Unusual, IndexError, struct.error):
                return None
            codes = add_codes(conn, transactional_id, producer_id, epoch, partitions, False)
            return write_add_partitions(correlation_id, api_version, codes)
        return answer

    def end_txn(self, api_version: int) -> FromFrame | None:
        if api_version not in END_TXN_VERSIONS:
            return None
        end_refusal, end_now = self.end_refusal, self.end_now

        def answer(conn: ConnectionInfo, frame: ReceivedFrame) -> bytes | None:
            try:
                correlation_id, transactional_id, producer_id, epoch, committed = \
                    read_end_txn(frame, api_version)
            except (_Unusual, IndexError, struct.error):
                return None
            code = end_refusal(conn, transactional_id)
            if code is None:
                code = end_now(transactional_id, producer_id, epoch, committed)
                if code is None:
                    return None  # a partition on another broker: the plain path waits for its marker
            return write_end_txn(correlation_id, api_version, code)
        return answer
