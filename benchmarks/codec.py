"""Codec throughput: kafkapy against kafka-python 3.x's own codec, on the same bytes.

Every row is one realistic message. Before anything is timed the row is
cross-checked: kafkapy and kafka-python must encode it to identical bytes,
and decoding those bytes must give equal values on both sides, so both
libraries do the same work on the same input. Timings are per whole frame:
header + body, without the 4-byte size prefix (kafka-python's
``encode(header=True)`` leaves it out unless ``framed=True``, and the byte
comparison above would catch it otherwise). The two libraries' runs are
interleaved; see :func:`benchmarks.measure`.

Besides the head-to-head table this reports two kafkapy-only comparisons:

* what construct compilation buys: the Metadata row through the interpreted
  ``MessageSchema.parse``/``build`` against the compiled schema's own
  ``parse``/``build`` (same construct entry point, body only);
* what lazy records buy: decoding Produce/Fetch without touching the records
  field against decoding and then iterating every record (CRC checked), with
  kafka-python's decode + ``MemoryRecords`` iteration (CRC checked) alongside.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import kafka
from kafka.protocol.admin import DescribeClientQuotasResponse
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.data_container import DataContainer
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.schemas.fields.codecs import BitField
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from benchmarks import Options, Report, Timing, machine_note, measure, render_table, revision
from kafkapy.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    message_schema,
)
from kafkapy.protocol.catalogue import response_header_version

TITLE = "Codec throughput"

CORRELATION_ID = 7
CLIENT_ID = "bench-producer-1"
BASE_TIMESTAMP = 1_767_225_600_000  # 2026-01-01T00:00:00Z, fixed so frames are reproducible


@dataclasses.dataclass
class Case:
    """One message of the mix, with everything both libraries need to encode and decode it."""

    label: str
    kind: str  # "request" or "response"
    api_key: int
    version: int
    body: dict[str, Any]  # kafkapy's value (snake_case names, as kafka-python's)
    kp_class: Any  # kafka-python's message class
    frame: bytes = b""
    kp_message: Any = None  # kafka-python's message object, header attached

    def kafkapy_encode(self) -> bytes:
        if self.kind == "request":
            return encode_request(self.api_key, self.version, CORRELATION_ID, CLIENT_ID, self.body)
        return encode_response(self.api_key, self.version, CORRELATION_ID, self.body)

    def kafkapy_decode(self) -> Any:
        if self.kind == "request":
            return decode_request(self.frame)
        return decode_response(self.frame, self.api_key, self.version)

    def kafka_python_encode(self) -> Any:
        # The object was built at self.version. Passing version= here again would fail for
        # responses: kafka-python's API_VERSION setter writes request_api_version into the
        # header, which a ResponseHeader lacks (kafka-python 3.0.12).
        return self.kp_message.encode(header=True)

    def kafka_python_decode(self) -> Any:
        return self.kp_class.decode(self.frame, version=self.version, header=True)


# --- the mix -------------------------------------------------------------------------------

# A Kafka 3.7 broker's ApiVersions answer: (api_key, min_version, max_version).
_BROKER_APIS = (
    (0, 0, 10), (1, 0, 16), (2, 0, 8), (3, 0, 12), (4, 0, 7), (5, 0, 4), (6, 0, 8), (7, 0, 3),
    (8, 0, 9), (9, 0, 9), (10, 0, 5), (11, 0, 9), (12, 0, 4), (13, 0, 5), (14, 0, 5), (15, 0, 5),
    (16, 0, 4), (17, 0, 1), (18, 0, 3), (19, 0, 7), (20, 0, 6), (21, 0, 2), (22, 0, 4), (23, 0, 4),
    (24, 0, 4), (25, 0, 3), (26, 0, 3), (27, 0, 1), (28, 0, 3), (29, 0, 3), (30, 0, 3), (31, 0, 3),
    (32, 0, 4), (33, 0, 2), (34, 0, 2), (35, 0, 4), (36, 0, 2), (37, 0, 3), (38, 0, 3), (39, 0, 2),
    (40, 0, 2), (41, 0, 3), (42, 0, 2), (43, 0, 2), (44, 0, 1), (45, 0, 0), (46, 0, 0), (47, 0, 0),
    (48, 0, 1), (49, 0, 1), (50, 0, 0), (51, 0, 0), (56, 0, 3), (57, 0, 1), (58, 0, 0), (60, 0, 1),
    (61, 0, 0), (64, 0, 0), (65, 0, 0), (66, 0, 0), (67, 0, 0), (68, 0, 0),
)


def api_versions_case() -> Case:
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in _BROKER_APIS],
        "throttle_time_ms": 0,
        # Tagged fields, as a KRaft broker sends them.
        "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 19}],
        "finalized_features_epoch": 4711,
        "finalized_features": [{"name": "metadata.version", "max_version_level": 19,
                                "min_version_level": 19}],
    }
    return Case(f"ApiVersions v3 response ({len(_BROKER_APIS)} keys)", "response", 18, 3, body,
                ApiVersionsResponse)


_DOMAINS = ("orders", "payments", "inventory", "shipping", "customers", "clickstream", "search",
            "billing", "fraud", "notifications")
_EVENTS = ("created", "updated", "deleted", "events", "snapshots", "audit", "dlq", "retry", "cdc", "metrics")


def metadata_case(topics: int = 100, partitions: int = 10) -> Case:
    rng = random.Random(3)
    brokers = 6
    listing: list[dict[str, Any]] = []
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": i, "host": f"kafka-{i}.kafka-headless.prod.svc.cluster.local",
                     "port": 9092, "rack": f"eu-west-1{'abc'[i % 3]}"} for i in range(brokers)],
        "cluster_id": "q9XBv2kOQ7S3f1Jm0rZ4bA",
        "controller_id": 1,
        "topics": listing,
    }
    for t in range(topics):
        name = f"{_DOMAINS[t % 10]}.{_EVENTS[t // 10 % 10]}.v{1 + t % 3}"
        parts = []
        for p in range(partitions):
            replicas = [(p + t + r) % brokers for r in range(3)]
            parts.append({"error_code": 0, "partition_index": p, "leader_id": replicas[0],
                          "leader_epoch": rng.randrange(40), "replica_nodes": replicas,
                          "isr_nodes": list(replicas), "offline_replicas": []})
        listing.append({"error_code": 0, "name": name,
                        "topic_id": uuid.UUID(int=rng.getrandbits(128)),
                        "is_internal": False, "partitions": parts,
                        "topic_authorized_operations": -2147483648})
    return Case(f"Metadata v12 response ({topics} topics x {partitions} partitions)", "response", 3, 12,
                body, MetadataResponse)


def client_quotas_case(entries: int = 200) -> Case:
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "entries": [
            {"entity": [{"entity_type": "user", "entity_name": f"svc-account-{i:04d}"},
                        {"entity_type": "client-id", "entity_name": f"client-{i % 17}"}],
             "values": [{"key": "producer_byte_rate", "value": float(1 << 20) * (1 + i % 4)},
                        {"key": "consumer_byte_rate", "value": float(2 << 20)},
                        {"key": "request_percentage", "value": 25.0 + i % 50}]}
            for i in range(entries)
        ],
    }
    return Case(f"DescribeClientQuotas v1 response ({entries} entries)", "response", 48, 1, body,
                DescribeClientQuotasResponse)


def record_batch(count: int, base_offset: int = 0, seed: int = 0, value_size: int = 100) -> bytes:
    """One uncompressed v2 batch, built by kafka-python's producer-side builder."""
    rng = random.Random(seed)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 22)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 {}:,\""
    for i in range(count):
        value = bytes(rng.choice(alphabet) for _ in range(value_size))
        builder.append(i, timestamp=BASE_TIMESTAMP + i * 3, key=b"user-%d" % rng.randrange(10_000),
                       value=value, headers=[])
    batch = bytearray(builder.build())
    if base_offset:
        batch[0:8] = base_offset.to_bytes(8, "big")  # base offset is outside the batch CRC
    return bytes(batch)


def produce_case(records: int = 100) -> Case:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "orders.created.v1",
                        "partition_data": [{"index": 3, "records": record_batch(records, seed=1)}]}],
    }
    return Case(f"Produce v9 request (1 batch x {records} records)", "request", 0, 9, body,
                ProduceRequest)


def fetch_case(partitions: int = 4, records: int = 100) -> Case:
    parts = []
    for p in range(partitions):
        base = 1_000_000 * (p + 1)
        parts.append({"partition_index": p, "error_code": 0, "high_watermark": base + records,
                      "last_stable_offset": base + records, "log_start_offset": base // 2,
                      "aborted_transactions": None, "preferred_read_replica": -1,
                      "records": record_batch(records, base_offset=base, seed=10 + p)})
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 912_301,
            "responses": [{"topic": "clickstream.events.v2", "partitions": parts}]}
    return Case(f"Fetch v12 response (1 topic x {partitions} partitions x {records} records)",
                "response", 1, 12, body, FetchResponse)


def the_mix() -> list[Case]:
    return [api_versions_case(), metadata_case(), client_quotas_case(), produce_case(), fetch_case()]


# --- cross-checking ------------------------------------------------------------------------

# kafka-python renames a few fields for backward compatibility; kafkapy keeps Kafka's names.
_KAFKA_PYTHON_NAMES = {"topic_authorized_operations": "authorized_operations",
                       "cluster_authorized_operations": "authorized_operations"}


def to_kafka_python(cls: Any, value: Mapping[str, Any], version: int) -> Any:
    """kafkapy's dict value as kafka-python's data object (nested containers included)."""
    fields = cls._struct.fields
    kwargs = {}
    for key, item in value.items():
        name = key if key in fields else _KAFKA_PYTHON_NAMES[key]
        field = fields[name]
        if item is not None and field.is_struct_array():
            item = [to_kafka_python(field.data_class, x, version) for x in item]
        elif item is not None and field.is_struct():
            item = to_kafka_python(field.data_class, item, version)
        elif _is_bitfield(field):
            item = _int_to_bits(item)
        kwargs[name] = item
    return cls(version=version, **kwargs)


def _is_bitfield(field: Any) -> bool:
    return getattr(field, "_type", None) is BitField


def _int_to_bits(value: int) -> set[int] | None:
    """kafka-python keeps authorized-operations bitfields as sets of bit numbers, None for bit 31."""
    bits = {b for b in range(32) if value >> b & 1}
    return None if bits == {31} else bits


def _bits_to_int(bits: set[int] | None) -> int:
    value = sum(1 << b for b in ({31} if bits is None else bits))
    return value - (1 << 32) if value >= 1 << 31 else value


_ZERO_UUID = uuid.UUID(int=0)


def _struct_default(field: Any, version: int) -> dict[str, Any]:
    return {f.name: (_struct_default(f, version) if f.is_struct() else f.default)
            for f in field._fields if f.for_version_q(version)}


def plain_kafka_python(value: Any, version: int) -> Any:
    """kafka-python's decoded object as plain data comparable with :func:`plain_kafkapy`."""
    if isinstance(value, DataContainer):
        out = {}
        for field in value._struct._fields:
            if not field.for_version_q(version):
                continue
            item = getattr(value, field.name)
            if item is None and field.is_struct() and field.tagged_field_q(version):
                # An absent tagged struct: kafka-python leaves None, kafkapy fills the default.
                item = _struct_default(field, version)
            elif _is_bitfield(field):
                item = _bits_to_int(item)
            out[field.name] = plain_kafka_python(item, version)
        return out
    if isinstance(value, list):
        return [plain_kafka_python(v, version) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def plain_kafkapy(value: Any) -> Any:
    if isinstance(value, dict):
        return {_KAFKA_PYTHON_NAMES.get(k, k): plain_kafkapy(v) for k, v in value.items()
                if k != "_unknown_tags"}
    if isinstance(value, list):
        return [plain_kafkapy(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID) and value == _ZERO_UUID:
        return None  # kafka-python decodes the zero UUID as None
    raw = getattr(value, "raw", None)  # Records
    if raw is not None:
        return bytes(raw)
    return value


def prepare(case: Case) -> None:
    """Build the frame and kafka-python's object, and check both libraries agree on them."""
    case.frame = case.kafkapy_encode()
    case.kp_message = to_kafka_python(case.kp_class, case.body, case.version)
    if case.kind == "request":
        case.kp_message.with_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)
    else:
        case.kp_message.with_header(correlation_id=CORRELATION_ID)
    theirs = bytes(case.kafka_python_encode())
    if theirs != case.frame:
        at = next((i for i, (a, b) in enumerate(zip(theirs, case.frame)) if a != b),
                  min(len(theirs), len(case.frame)))
        raise AssertionError(f"{case.label}: kafkapy and kafka-python encode differently "
                             f"(lengths {len(case.frame)} / {len(theirs)}, first difference at byte {at})")
    ours = case.kafkapy_decode()
    decoded = case.kafka_python_decode()
    assert ours.correlation_id == decoded.header.correlation_id == CORRELATION_ID, case.label
    mine, other = plain_kafkapy(ours.body), plain_kafka_python(decoded, case.version)
    if mine != other:
        diff = sorted(k for k in mine.keys() | other.keys() if mine.get(k) != other.get(k))
        raise AssertionError(f"{case.label}: kafkapy and kafka-python decode differently in {diff}")
    again = (encode_request(case.api_key, case.version, CORRELATION_ID, CLIENT_ID, ours.body)
             if case.kind == "request" else
             encode_response(case.api_key, case.version, CORRELATION_ID, ours.body))
    assert again == case.frame, f"{case.label}: kafkapy does not re-encode its own decoding identically"


# --- record iteration ---------------------------------------------------------------------

def _records_fields(case: Case, body: Any) -> list[Any]:
    if case.api_key == 0:
        return [p["records"] for t in body["topic_data"] for p in t["partition_data"]]
    return [p["records"] for t in body["responses"] for p in t["partitions"]]


def _kp_records_fields(case: Case, message: Any) -> list[Any]:
    if case.api_key == 0:
        return [p.records for t in message.topic_data for p in t.partition_data]
    return [p.records for t in message.responses for p in t.partitions]


def kafkapy_decode_and_iterate(case: Case) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for records in _records_fields(case, case.kafkapy_decode().body):
            for record in records.records():
                n += len(record.value)
        return n
    return run


def kafka_python_decode_and_iterate(case: Case) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for raw in _kp_records_fields(case, case.kafka_python_decode()):
            batches = MemoryRecords(bytes(raw))
            while batches.has_next():
                batch = batches.next_batch()
                if not batch.validate_crc():
                    raise AssertionError("bad CRC")
                for record in batch:
                    n += len(record.value)
        return n
    return run


# --- running -------------------------------------------------------------------------------

def _rate(t: Timing) -> str:
    r = t.rate
    return f"{r:,.0f}" if r >= 100 else f"{r:,.1f}"


def _us(t: Timing) -> str:
    return f"{t.median * 1e6:,.1f} / {t.best * 1e6:,.1f}"


def _mb(t: Timing, size: int) -> str:
    return f"{size * t.rate / 1e6:,.1f}"


def _speedup(fast: float, slow: float) -> str:
    """How many times faster the first of two per-call times is: ``slow / fast``."""
    return f"{slow / fast:.2f}x"


HEAD_TO_HEAD = ["message", "bytes", "op", "kafkapy msg/s", "MB/s", "kafka-python msg/s", "MB/s",
                "ratio", "ratio (min)", "ratio (CPU)", "kafkapy us med/min", "kafka-python us med/min"]


def head_to_head(cases: list[Case], options: Options) -> list[list[str]]:
    rows = []
    for case in cases:
        for op in ("decode", "encode"):
            fns = ({"kafkapy": case.kafkapy_decode, "kafka-python": case.kafka_python_decode}
                   if op == "decode" else
                   {"kafkapy": case.kafkapy_encode, "kafka-python": case.kafka_python_encode})
            t = measure(fns, options)
            ours, theirs = t["kafkapy"], t["kafka-python"]
            size = len(case.frame)
            rows.append([case.label if op == "decode" else "", f"{size:,}", op,
                         _rate(ours), _mb(ours, size), _rate(theirs), _mb(theirs, size),
                         _speedup(ours.median, theirs.median), _speedup(ours.best, theirs.best),
                         _speedup(ours.cpu, theirs.cpu), _us(ours), _us(theirs)])
    return rows


COMPILATION = ["Metadata v12 body", "bytes", "op", "interpreted msg/s", "compiled msg/s",
               "compiled/interpreted", "(CPU)", "interpreted us med/min", "compiled us med/min"]


def compilation(case: Case, options: Options) -> list[list[str]]:
    """The interpreted construct path against the compiled one, through the same entry points."""
    schema = message_schema(case.api_key, case.kind, case.version)
    compiled = schema.compile()
    body = case.frame[_response_header_size(case):]
    assert schema.parse(body) == compiled.parse(body)
    assert schema.build(case.body) == compiled.build(case.body) == body
    rows = []
    for op in ("parse", "build"):
        fns: dict[str, Callable[[], object]] = (
            {"interpreted": lambda: schema.parse(body), "compiled": lambda: compiled.parse(body)}
            if op == "parse" else
            {"interpreted": lambda: schema.build(case.body), "compiled": lambda: compiled.build(case.body)})
        t = measure(fns, options)
        interp, comp = t["interpreted"], t["compiled"]
        rows.append(["", f"{len(body):,}", op, _rate(interp), _rate(comp),
                     _speedup(comp.median, interp.median), _speedup(comp.cpu, interp.cpu),
                     _us(interp), _us(comp)])
    return rows


def _response_header_size(case: Case) -> int:
    header = message_schema(-1, "response", response_header_version(case.api_key, case.version))
    _, encode = header.compiled_codec()
    out = bytearray()
    encode({"correlation_id": CORRELATION_ID}, out)
    return len(out)


LAZINESS = ["message", "records", "kafkapy decode msg/s", "kafkapy decode+iterate msg/s", "lazy gain",
            "kafka-python decode+iterate msg/s", "ratio (iterate)", "(CPU)"]


def laziness(cases: list[Case], options: Options) -> list[list[str]]:
    rows = []
    for case in cases:
        count = sum(1 for f in _records_fields(case, case.kafkapy_decode().body) for _ in f.records())
        ours, theirs = kafkapy_decode_and_iterate(case), kafka_python_decode_and_iterate(case)
        assert ours() == theirs() > 0, case.label  # same records, same value bytes
        t = measure({"decode": case.kafkapy_decode, "iterate": ours, "kafka-python": theirs}, options)
        rows.append([case.label.split(" (")[0], str(count), _rate(t["decode"]), _rate(t["iterate"]),
                     _speedup(t["decode"].median, t["iterate"].median), _rate(t["kafka-python"]),
                     _speedup(t["iterate"].median, t["kafka-python"].median),
                     _speedup(t["iterate"].cpu, t["kafka-python"].cpu)])
    return rows


def run(options: Options) -> Report:
    cases = the_mix()
    for case in cases:
        prepare(case)
    rows = head_to_head(cases, options)
    # The kafkapy-only tables compare things several times apart; half-length blocks keep
    # the whole run near 45 s.
    brief = dataclasses.replace(options, block_seconds=options.block_seconds / 2)
    comp_rows = compilation(next(c for c in cases if c.api_key == 3), brief)
    lazy_rows = laziness([c for c in cases if c.api_key in (0, 1)], brief)

    repeats, block = (1, 0.01) if options.quick else (options.repeats, options.block_seconds)
    method = (f"{repeats} interleaved timed blocks per measurement, each ~{block:g} s in the "
              f"kafkapy/kafka-python table and ~{block / 2:g} s in the other two; msg/s and MB/s "
              "from the median wall-clock block. ratio = kafkapy speed / kafka-python speed "
              "(>1: kafkapy is faster), from the median wall-clock block, the fastest block (min), "
              "and the median CPU-time block (CPU: leaves out time spent descheduled, the steadier "
              "figure on a shared machine). us med/min: microseconds per message, median/min block.")
    setting = f"{machine_note()}; kafka-python {kafka.__version__}; kafkapy {revision()}"
    comp_note = ("What construct compilation buys: kafkapy's Metadata v12 body (no header) through the "
                 "interpreted `MessageSchema.parse`/`build` against the compiled schema's `parse`/`build`, "
                 "the same construct entry points.")
    lazy_note = ("What lazy records buy: kafkapy's decode leaves each `records` field as raw bytes; "
                 "decode+iterate also decodes every record and checks every batch CRC. kafka-python "
                 "decodes records only through `MemoryRecords`, so its column is decode + iterate "
                 "(CRC checked) too.")
    text = "\n\n".join([
        setting, method,
        render_table(HEAD_TO_HEAD, rows),
        comp_note.replace("`", "") + "\n" + render_table(COMPILATION, comp_rows),
        lazy_note.replace("`", "") + "\n" + render_table(LAZINESS, lazy_rows),
    ])
    markdown = "\n\n".join([
        f"Measured {datetime.date.today().isoformat()} with `python -m benchmarks codec --write-docs`: "
        f"{setting}. Frames are whole messages (header and body, no size prefix). Before timing, "
        "both libraries must encode each message to identical bytes and decode those bytes to equal "
        "values, so they do the same work on the same input.",
        method,
        render_table(HEAD_TO_HEAD, rows, markdown=True),
        comp_note,
        render_table(COMPILATION, comp_rows, markdown=True),
        lazy_note,
        render_table(LAZINESS, lazy_rows, markdown=True),
    ])
    return Report(text, markdown)
