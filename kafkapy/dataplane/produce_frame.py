"""Produce's fast path from the frame: the common Produce answered straight from its bytes.

A producer sending one record at a time makes the per-request costs the whole cost, and the
plain path (kafkapy.dataplane.produce, behind the dispatcher's decode and encode) spends about
two hundred Python calls on a request that is nearly always the same shape. This path takes that
shape only, and answers it in a few dozen:

Theory of operation
-------------------
1. **Read** the frame with struct reads at known offsets (no schema, no dict per level): the
   header's correlation id (the client id skipped), then the body, which must hold records for
   each partition, no tagged fields anywhere, and end where the frame ends. One topic with one
   partition is read at fixed offsets; several (librdkafka sends one Produce per broker with every
   partition it has batches for) by a walk over the topics and partitions (``_read_many``).
2. **Admit** with what the plain path looks up, read-only: acks -1, 0 or 1; a transactional batch
   with a transactional id the principal may WRITE; a topic the principal may WRITE (asked only
   when an authorizer is configured); a topic the topics view holds, led here, whose
   log and producer table exist and whose log has started the current leader epoch (the plain
   path makes them the first time); a transactional batch whose producer has an open
   transaction in the partition, or (``transaction.partition.verification.enable``, KIP-890)
   whose transaction coordinator is this broker and finds the partition in the transaction
   (``ProduceHandler.verified_here``); a refusal, or a coordinator elsewhere to ask, is the
   plain path's, and so are transactional batches of more than one producer id and epoch
   (INVALID_PRODUCER_ID_MAPPING for the whole request).
3. **Check** one RecordBatch read over the one copy of the records with
   ``clean_batch_max_timestamp``, every check ``validate_records`` makes (a batch of more records
   than one slice of the walk is declined: the plain path checks it in slices).
4. **Stamp** offsets and epoch in place (``stamp_batch``, which keeps the header read in step).
5. **Producer state**: ``check_and_update``; a retried batch or a refusal records nothing.
6. **Append** (``SegmentedLog.store_one``, the plain path's one-batch append less its AppendInfo),
   wake the partition's long polls, and answer with the response bytes built here.

Anything else returns None before step 5 has recorded anything, and the dispatcher hands the
frame to the plain path, which decides it from scratch: so nothing this path declines is
answered differently, and the copy and stamp it made are simply dropped. A request for several
partitions is taken only whole: steps 2 and 3 and the producer table's verdict
(``ProducerStateManager.would_append``, which records nothing) for every partition first, then
steps 4 to 6 for each (``record_checked`` records what ``would_append`` took, in the same loop
step); a partition any step would refuse leaves the whole request to the plain path. (One thing
is done twice then: a transactional batch whose WRITE is denied asks the authorizer again.) The
dispatcher offers a frame only when nothing watches or wraps the request: no observers, no
module request hooks, no interceptor that applies (kafkapy.server.dispatch), the version is not
refused by an emulated release, and the switch ``FastPaths.from_frame`` is on.
tests/dataplane/test_produce_from_frame.py holds it byte-equal to the plain path (answers, log
contents, producer state, high watermark) over generated requests, good and bad.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkapy.dataplane.produce import (
    ACKS_ALL,
    FIRST_TOPIC_ID_VERSION,
    V2_PRODUCER_ID_AT,
    VALID_ACKS,
    ProduceHandler,
    too_few_in_sync,
)
from kafkapy.errors import DecodeError, ErrorCode, KafkaApiError
from kafkapy.log.append import clean_batch_max_timestamp, recompression_target, stamp_batch
from kafkapy.protocol.framing import ReceivedFrame
from kafkapy.protocol.primitives import read_uvarint, uvarint_bytes
from kafkapy.protocol.records import (
    LOG_APPEND_TIME,
    TRANSACTIONAL_BIT,
    V2_ATTRIBUTES_AT,
    V2_HEADER_SIZE,
    V2_MAGIC_AT,
    RecordBatch,
)
from kafkapy.protocol.strings import JAVA_REPLACE
from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.modules import NO_RESPONSE, FromFrame

if TYPE_CHECKING:
    from kafkapy.log.producer_state import ProducerStateManager
    from kafkapy.log.segmented import SegmentedLog
    from kafkapy.log.topic_config import LogConfig
    from kafkapy.server.connection import ConnectionInfo

__all__ = ["FAST_VERSIONS", "ProduceFromFrame"]

FAST_VERSIONS = range(3, FIRST_TOPIC_ID_VERSION + 1)  # every version the plain path serves
_FIRST_FLEXIBLE = 9  # Produce v9 is the first flexible version (KIP-482)
_FIRST_LOG_START_OFFSET = 5  # log_start_offset in responses from v5 (KIP-107)
_FIRST_RECORD_ERRORS = 8  # record_errors and error_message from v8 (KIP-467)
_ACKS = frozenset(VALID_ACKS)
_ATTRIBUTES_LOW_BYTE = V2_ATTRIBUTES_AT + 1  # the byte holding the transactional bit
_NO_OFFSET = -1  # log_append_time_ms under CreateTime
_NO_ERROR = int(ErrorCode.NONE)  # packed as a plain int
_UUID_SIZE = 16
_COPY_SLICE_BELOW = 4096  # records smaller than this are copied through a slice, quicker than a view
_NAMES_KEPT = 1024  # response heads kept per version, by topic name bytes (bounded against churn)

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_PRODUCER = struct.Struct(">qh").unpack_from  # a v2 batch header's producer id and epoch
_ACKS_AND_COUNT = struct.Struct(">h4xi").unpack_from  # acks, timeout (skipped), topic count
_COUNT_I32 = struct.Struct(">ii").unpack_from  # partition count, partition index
_SIZE = struct.Struct(">i").pack
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log_start_offset


class ProduceFromFrame:
    """Per Produce version, the frame answerer of the common request (``ApiHandler.from_frame``)."""

    def __init__(self, handler: ProduceHandler, broker_id: Callable[[], int]) -> None:
        self.handler = handler
        self.broker_id = broker_id

    def for_version(self, api_version: int) -> FromFrame | None:
        """The answerer of ``api_version`` frames, or None for a version it does not read."""
        if api_version not in FAST_VERSIONS:
            return None
        flexible = api_version >= _FIRST_FLEXIBLE
        by_id = api_version >= FIRST_TOPIC_ID_VERSION
        with_log_start = api_version >= _FIRST_LOG_START_OFFSET
        partition_layout = _PARTITION_V5 if with_log_start else _PARTITION_V3
        pack_partition = partition_layout.pack

        def pack_storage_error(index: int) -> bytes:
            """A partition whose log dir failed (the plain path's _failed(KAFKA_STORAGE_ERROR))."""
            failed = (index, ErrorCode.KAFKA_STORAGE_ERROR, _NO_OFFSET, _NO_OFFSET)
            return pack_partition(*failed, _NO_OFFSET) if with_log_start else pack_partition(*failed)
        # The response around the topic name (or id) and the partition, fixed per version: after
        # the correlation id, the header's tag section (flexible), then one topic; after the
        # partition, record_errors and error_message (v8+), the tag sections, throttle_time_ms 0.
        before_name = b"\x00\x02" if flexible else b"\x00\x00\x00\x01"
        between = b"\x02" if flexible else b"\x00\x00\x00\x01"
        if flexible:
            after = b"\x01\x00\x00\x00" + b"\x00\x00\x00\x00" + b"\x00"
        elif api_version >= _FIRST_RECORD_ERRORS:
            after = b"\x00\x00\x00\x00\xff\xff" + b"\x00\x00\x00\x00"
        else:
            after = b"\x00\x00\x00\x00"
        fixed_size = 4 + len(before_name) + len(between) + partition_layout.size + len(after)
        heads: dict[bytes, tuple[bytes, bytes]] = {}  # name field -> (size prefix, bytes up to the partition)

        handler = self.handler
        partitions = handler.partitions
        append_config = handler.append_config
        clock_ms = handler.clock_ms
        broker_id = self.broker_id
        topic_name = partitions.topic_name
        appended = partitions.appended

        if flexible:
            partition_tail, topic_tail, body_tail = b"\x01\x00\x00", b"\x00", b"\x00\x00\x00\x00\x00"
        elif api_version >= _FIRST_RECORD_ERRORS:
            partition_tail, topic_tail, body_tail = b"\x00\x00\x00\x00\xff\xff", b"", b"\x00\x00\x00\x00"
        else:
            partition_tail, topic_tail, body_tail = b"", b"", b"\x00\x00\x00\x00"
        count_of = _uvarint_plus_one if flexible else _SIZE

        def answer_many(conn: ConnectionInfo, frame: ReceivedFrame) -> bytes | None:
            """Several topics or partitions: all taken, or None before anything is recorded."""
            read = _read_many(frame, flexible, by_id, topic_name)
            if read is None:
                return None
            transactional_id, acks, topics = read
            if acks not in _ACKS:
                return None
            authorize = handler.authorize
            cluster = partitions.cluster
            home = partitions.home
            me = broker_id()
            now_ms = clock_ms()
            transactional_checked = False
            producer: tuple[int, int] | None = None  # the transactional batches' one producer and epoch
            unverified: list[tuple[str, int]] = []  # KIP-890: partitions to verify with the coordinator
            planned: list[tuple[str, int, bytearray, RecordBatch, int, int, bool, SegmentedLog,
                                ProducerStateManager]] = []
            for name, _, parts in topics:
                if name in INTERNAL_TOPICS:  # refused (or admitted by client id) on the plain path
                    return None
                if authorize is not None and not authorize(conn.principal, conn.client_address[0], "WRITE",
                                                           "TOPIC", name):
                    return None
                info = cluster.topics.get(name)
                if info is None:
                    return None
                config = append_config(name)
                log_append_time = config.message_timestamp_type == LOG_APPEND_TIME
                topic_id = home.topic_ids.get(name)
                if topic_id is not info.topic_id and topic_id != info.topic_id:
                    return None
                for index, start, stop in parts:
                    if stop - start < V2_HEADER_SIZE or frame[start + V2_MAGIC_AT] != 2:
                        return None
                    if recompression_target(config, frame[start + _ATTRIBUTES_LOW_BYTE]) is not None:
                        return None  # rebuilt with the topic's codec on the plain path
                    if frame[start + _ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT and not transactional_checked:
                        if transactional_id is None or (authorize is not None and not authorize(
                                conn.principal, conn.client_address[0], "WRITE", "TRANSACTIONAL_ID",
                                transactional_id)):
                            return None
                        transactional_checked = True
                    leadership = cluster.leadership(name, index)
                    if leadership is None or leadership[0] != me or (
                            acks == ACKS_ALL and too_few_in_sync(partitions, name, index, config)):
                        return None
                    key = (name, index)
                    log = home.logs.logs.get(key)
                    state = home.producers.get(key)
                    epoch = leadership[1]
                    if (log is None or state is None or log.topic_id is not info.topic_id
                            or log.epochs.latest_epoch < epoch):
                        return None
                    if frame[start + _ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT:
                        batch_producer = _PRODUCER(frame, start + V2_PRODUCER_ID_AT)
                        if producer is not None and batch_producer != producer:
                            return None  # INVALID_PRODUCER_ID_MAPPING: the plain path's answer
                        producer = batch_producer
                        if handler.verification_enabled and not state.in_transaction(producer[0]):
                            unverified.append(key)  # the transaction's first batch here
                    data = bytearray(frame[start:stop] if stop - start < _COPY_SLICE_BELOW
                                     else memoryview(frame)[start:stop])
                    try:
                        batch = RecordBatch(data)
                    except DecodeError:
                        return None
                    max_timestamp = clean_batch_max_timestamp(batch, data, config, now_ms, api_version)
                    if max_timestamp is None or not state.would_append(batch):
                        return None
                    planned.append((name, index, data, batch, max_timestamp, epoch, log_append_time, log,
                                    state))
            if producer is not None and unverified and not handler.verified_here(transactional_id, *producer,
                                                                                 unverified):
                return None  # refused, or a coordinator elsewhere to ask: the plain path's answer
            answered: list[bytes] = []
            for name, index, data, batch, max_timestamp, epoch, log_append_time, log, state in planned:
                if log.closed:  # its dir failed under an earlier partition of this request
                    answered.append(pack_storage_error(index) + partition_tail)
                    continue
                base_offset = log.log_end_offset
                stamp_batch(data, batch, base_offset=base_offset, leader_epoch=epoch,
                            max_timestamp=now_ms if log_append_time else max_timestamp,
                            log_append_time=log_append_time)
                state.record_checked(batch)  # would_append took it as new, nothing ran in between
                try:
                    log.store_one(data, batch, now_ms)
                except OSError as exc:  # the dir failed: this partition's answer, the others go on
                    partitions.storage_failed(name, index, exc)
                    answered.append(pack_storage_error(index) + partition_tail)
                    continue
                appended(name, index)
                append_time = now_ms if log_append_time else _NO_OFFSET
                packed = pack_partition(index, _NO_ERROR, base_offset, append_time, log.log_start_offset) \
                    if with_log_start else pack_partition(index, _NO_ERROR, base_offset, append_time)
                answered.append(packed + partition_tail)
            if acks == 0:
                return NO_RESPONSE
            body = [frame[4:8], b"\x00" if flexible else b"", count_of(len(topics))]
            taken = iter(answered)
            for _, name_field, parts in topics:
                body.append(name_field)
                body.append(count_of(len(parts)))
                body.extend(next(taken) for _ in parts)
                body.append(topic_tail)
            body.append(body_tail)
            response = b"".join(body)
            return _SIZE(len(response)) + response

        def answer(conn: ConnectionInfo, frame: ReceivedFrame) -> bytes | None:
            end = len(frame)
            try:
                # --- 1. read ---------------------------------------------------------------
                n = _I16(frame, 8)[0]  # the client id's length (int16 in every header version)
                pos = 10 + n if n > 0 else 10
                if n < -1:
                    return None
                transactional_id: str | None = None
                if flexible:
                    if frame[pos] != 0:  # the header's tagged fields
                        return None
                    n = frame[pos + 1]  # the transactional id: a compact nullable string
                    if n >= 0x80:
                        return None
                    pos += 2
                    if n:
                        transactional_id = str(frame[pos:pos + n - 1], "utf-8", JAVA_REPLACE)
                        pos += n - 1
                    acks = _I16(frame, pos)[0]
                    if frame[pos + 6] != 2:  # one topic
                        return answer_many(conn, frame)
                    pos += 7
                    if by_id:
                        name_start, pos = pos, pos + _UUID_SIZE
                        name = topic_name(uuid.UUID(bytes=bytes(frame[name_start:pos])))  # ValueError if cut
                        name_end = pos
                        if name is None:
                            return None
                    else:
                        n = frame[pos]
                        if not 0 < n < 0x80:
                            return None
                        name_start, pos = pos, pos + n
                        name = str(frame[name_start + 1:pos], "utf-8", JAVA_REPLACE)
                        name_end = pos
                    if frame[pos] != 2:  # one partition
                        return answer_many(conn, frame)
                    index = _I32(frame, pos + 1)[0]
                    pos += 5
                    # the records: compact nullable bytes, an unsigned varint length + 1
                    size = shift = 0
                    while True:
                        byte = frame[pos]
                        pos += 1
                        size |= (byte & 0x7F) << shift
                        if byte < 0x80:
                            break
                        shift += 7
                        if shift > 28:
                            return None
                    size -= 1
                    records_start = pos
                    pos += size
                    # the partition's, the topic's and the body's tag sections, all empty
                    if size < V2_HEADER_SIZE or pos + 3 != end or frame[pos:] != b"\x00\x00\x00":
                        return None
                else:
                    transactional_id, pos = _nullable_string(frame, pos)
                    acks, topics = _ACKS_AND_COUNT(frame, pos)
                    if topics != 1:
                        return answer_many(conn, frame)
                    pos += 10
                    n = _I16(frame, pos)[0]
                    if n < 0:
                        return None
                    name_start, pos = pos, pos + 2 + n
                    name = str(frame[name_start + 2:pos], "utf-8", JAVA_REPLACE)
                    name_end = pos
                    count, index = _COUNT_I32(frame, pos)
                    if count != 1:
                        return answer_many(conn, frame)
                    size = _I32(frame, pos + 8)[0]
                    records_start = pos + 12
                    pos = records_start + size
                    if size < V2_HEADER_SIZE or pos != end:
                        return None
            except (struct.error, IndexError, ValueError):
                return None
            name_field = bytes(frame[name_start:name_end])  # a dict key, also of a kept bytearray frame
            if acks not in _ACKS or frame[records_start + V2_MAGIC_AT] != 2:
                return None

            # --- 2. admit ----------------------------------------------------------------------
            authorize = handler.authorize
            if frame[records_start + _ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT:
                if transactional_id is None or (authorize is not None and not authorize(
                        conn.principal, conn.client_address[0], "WRITE", "TRANSACTIONAL_ID",
                        transactional_id)):
                    return None
            if authorize is not None and not authorize(conn.principal, conn.client_address[0], "WRITE",
                                                       "TOPIC", name):
                return None
            cluster = partitions.cluster
            info = cluster.topics.get(name)
            if info is None or name in INTERNAL_TOPICS:
                return None
            leadership = cluster.leadership(name, index)
            if leadership is None or leadership[0] != broker_id():
                return None
            key = (name, index)
            home = partitions.home
            log = home.logs.logs.get(key)
            state = home.producers.get(key)
            epoch = leadership[1]
            topic_id = home.topic_ids.get(name)  # usually the very UUID the topics view holds: no __eq__
            # the log's own topic id too: one on disk naming another topic is refused by leader_log
            if (log is None or state is None or (topic_id is not info.topic_id and topic_id != info.topic_id)
                    or log.topic_id is not info.topic_id or log.epochs.latest_epoch < epoch):
                return None

            if (frame[records_start + _ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT
                    and handler.verification_enabled):
                producer_id, producer_epoch = _PRODUCER(frame, records_start + V2_PRODUCER_ID_AT)
                if not state.in_transaction(producer_id) and not handler.verified_here(
                        transactional_id, producer_id, producer_epoch, (key,)):
                    return None  # refused, or a coordinator elsewhere to ask: the plain path's answer

            # --- 3. check, 4. stamp, 5. producer state, 6. append (_check_stamp_append); answer ---
            now_ms = clock_ms()
            config = append_config(name)
            if acks == ACKS_ALL and too_few_in_sync(partitions, name, index, config):
                return None  # NOT_ENOUGH_REPLICAS: the plain path's answer
            if recompression_target(config, frame[records_start + _ATTRIBUTES_LOW_BYTE]) is not None:
                return None  # rebuilt with the topic's codec on the plain path
            log_append_time = config.message_timestamp_type == LOG_APPEND_TIME
            base_offset = log.log_end_offset
            correlation_id = frame[4:8]
            cut = None
            failure: OSError | None = None
            try:
                if type(frame) is bytearray:
                    # A large frame kept as received (FastPaths.kept_frames), no one else's: it becomes
                    # the batch the log keeps, its request head and tag bytes cut off in place (a cut
                    # at the front moves the bytearray's start, no copy), all put back if declined.
                    cut = _Cut(frame, records_start, pos)
                    if not _check_stamp_append(frame, cut, config, now_ms, api_version, log, base_offset,
                                               epoch, state):
                        cut.undo()  # the batch and its views are gone with the call: the frame may resize
                        return None
                elif not _check_stamp_append(  # the one copy (a slice of a large frame would be one more)
                        bytearray(frame[records_start:pos] if size < _COPY_SLICE_BELOW
                                  else memoryview(frame)[records_start:pos]),
                        None, config, now_ms, api_version, log, base_offset, epoch, state):
                    return None
            except OSError as exc:
                failure = exc.with_traceback(None)  # its frames' views of the frame go with them
            if failure is not None:  # the dir failed: the plain path answers KAFKA_STORAGE_ERROR
                partitions.storage_failed(name, index, failure)
                if cut is not None:
                    cut.undo()
                return None
            appended(name, index)
            if acks == 0:
                return NO_RESPONSE
            head = heads.get(name_field)
            if head is None:
                if len(heads) >= _NAMES_KEPT:
                    heads.clear()
                head = heads[name_field] = (_SIZE(fixed_size + len(name_field)),
                                            before_name + name_field + between)
            append_time = now_ms if log_append_time else _NO_OFFSET
            partition = pack_partition(index, _NO_ERROR, base_offset, append_time, log.log_start_offset) \
                if with_log_start else pack_partition(index, _NO_ERROR, base_offset, append_time)
            return b"".join((head[0], correlation_id, head[1], partition, after))

        return answer


_Topics = list[tuple[str, bytes, list[tuple[int, int, int]]]]  # name, name field, (index, start, stop)


def _uvarint_plus_one(count: int) -> bytes:
    """A compact array's length: the unsigned varint of count + 1."""
    return uvarint_bytes(count + 1)


def _read_uvarint(frame: ReceivedFrame, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos`` and the position after it (DecodeError if cut or too long)."""
    return read_uvarint(frame, pos, len(frame), "length")


def _nullable_string(frame: ReceivedFrame, pos: int) -> tuple[str | None, int]:
    """A non-flexible nullable string (the transactional id) and the position after it;
    ValueError for a length below -1."""
    n = _I16(frame, pos)[0]
    if n < -1:
        raise ValueError("negative string length")
    pos += 2
    if n < 0:
        return None, pos
    return str(frame[pos:pos + n], "utf-8", JAVA_REPLACE), pos + n


def _read_many(frame: ReceivedFrame, flexible: bool, by_id: bool,
               topic_name: Callable[[uuid.UUID], str | None]) -> tuple[str | None, int, _Topics] | None:
    """A Produce body of any number of topics and partitions, each with records: the
    transactional id, acks and, per topic, its name, its name field's bytes (what the response
    repeats) and its partitions' records' spans; None for anything else (tagged fields, null
    records, a topic named twice, bytes past the body, an unknown topic id)."""
    try:
        n = _I16(frame, 8)[0]
        if n < -1:
            return None
        pos = 10 + max(n, 0)
        transactional_id: str | None = None
        if flexible:
            if frame[pos] != 0:
                return None
            n, pos = _read_uvarint(frame, pos + 1)
            if n:
                transactional_id = str(frame[pos:pos + n - 1], "utf-8", JAVA_REPLACE)
                pos += n - 1
            acks = _I16(frame, pos)[0]
            topic_count, pos = _read_uvarint(frame, pos + 6)
            topic_count -= 1
        else:
            transactional_id, pos = _nullable_string(frame, pos)
            acks, topic_count = _ACKS_AND_COUNT(frame, pos)
            pos += 10
        if topic_count < 1:
            return None
        topics: _Topics = []
        names: set[str] = set()
        for _ in range(topic_count):
            name_start = pos
            if by_id:
                pos += _UUID_SIZE
                name = topic_name(uuid.UUID(bytes=bytes(frame[name_start:pos])))
                if name is None:
                    return None
            elif flexible:
                n, pos = _read_uvarint(frame, pos)
                if n < 2:
                    return None
                pos += n - 1
                name = str(frame[pos - n + 1:pos], "utf-8", JAVA_REPLACE)
            else:
                n = _I16(frame, pos)[0]
                if n < 1:
                    return None
                pos += 2 + n
                name = str(frame[pos - n:pos], "utf-8", JAVA_REPLACE)
            if name in names:
                return None
            names.add(name)
            name_field = bytes(frame[name_start:pos])
            if flexible:
                partition_count, pos = _read_uvarint(frame, pos)
                partition_count -= 1
            else:
                partition_count = _I32(frame, pos)[0]
                pos += 4
            if partition_count < 1:
                return None
            parts: list[tuple[int, int, int]] = []
            for _ in range(partition_count):
                index = _I32(frame, pos)[0]
                if flexible:
                    size, pos = _read_uvarint(frame, pos + 4)
                    size -= 1
                else:
                    size = _I32(frame, pos + 4)[0]
                    pos += 8
                if size < 0:
                    return None
                parts.append((index, pos, pos + size))
                pos += size
                if flexible:
                    if frame[pos] != 0:  # the partition's tagged fields
                        return None
                    pos += 1
            if flexible:
                if frame[pos] != 0:  # the topic's tagged fields
                    return None
                pos += 1
            topics.append((name, name_field, parts))
        if flexible:
            if frame[pos] != 0:  # the body's tagged fields
                return None
            pos += 1
        if pos != len(frame):
            return None
    except (struct.error, IndexError, ValueError, DecodeError):
        return None
    return transactional_id, acks, topics


class _Cut:
    """A kept frame cut down to its records in place, and what it takes to make it whole again."""

    __slots__ = ("frame", "head", "header", "tail")

    def __init__(self, frame: bytearray, start: int, stop: int) -> None:
        self.frame = frame
        self.tail = frame[stop:]
        del frame[stop:]
        self.head = frame[:start]
        del frame[:start]
        self.header: bytearray | None = None  # the batch header before its stamp

    def undo(self) -> None:
        """The frame as it came (only once no view of it is held: a bytearray with one won't resize)."""
        frame = self.frame
        if self.header is not None:
            frame[:len(self.header)] = self.header
        frame[:0] = self.head
        frame += self.tail


def _check_stamp_append(data: bytearray, cut: _Cut | None, config: LogConfig, now_ms: int, api_version: int,
                        log: SegmentedLog, base_offset: int, epoch: int, state: ProducerStateManager) -> bool:
    """Steps 3-6 on the batch that is all of ``data``: check, stamp at ``base_offset`` (the log end
    offset, read once by the caller), producer state, append. False if the plain path must answer;
    nothing then changed but ``data``'s header (kept in ``cut``)."""
    try:
        batch = RecordBatch(data)
    except DecodeError:
        return False
    max_timestamp = clean_batch_max_timestamp(batch, data, config, now_ms, api_version)
    if max_timestamp is None:
        return False
    log_append_time = config.message_timestamp_type == LOG_APPEND_TIME
    if cut is not None:
        cut.header = data[:V2_HEADER_SIZE]
    stamp_batch(data, batch, base_offset=base_offset, leader_epoch=epoch,
                max_timestamp=now_ms if log_append_time else max_timestamp,
                log_append_time=log_append_time)
    try:
        if state.check_and_update(batch) is not None:
            return False  # a retry: the plain path answers with the offsets it got then
    except KafkaApiError:
        return False  # refused, nothing recorded: the plain path answers it
    log.store_one(data, batch, now_ms)
    return True
