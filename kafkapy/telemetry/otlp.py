"""The metrics a client pushes (KIP-714), read from OTLP's ``MetricsData`` protobuf.

A pushed payload is an OpenTelemetry ``MetricsData`` message. kafkapy reads the part of it tests
ask about: every data point of every metric, flattened into one :class:`MetricPoint` each, with
the resource's attributes (``client_id``, ``client_software_name``... as librdkafka sets them) and
the point's own. Protobuf's wire format is small enough to walk here (varints, fixed 64-bit and
length-delimited fields), so reading a push needs no protobuf runtime. Unknown fields are skipped,
as protobuf readers must; a payload that is not protobuf at all raises :class:`OtlpError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import attrs

__all__ = ["MetricPoint", "OtlpError", "decode_metrics"]

# Protobuf wire types.
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")

# OTLP field numbers (opentelemetry/proto/metrics/v1/metrics.proto and common/v1/common.proto).
_RESOURCE_METRICS = 1  # MetricsData
_RESOURCE, _SCOPE_METRICS = 1, 2  # ResourceMetrics
_RESOURCE_ATTRIBUTES = 1  # Resource
_METRICS = 2  # ScopeMetrics
_NAME, _GAUGE, _SUM, _HISTOGRAM, _EXPONENTIAL_HISTOGRAM, _SUMMARY = 1, 5, 7, 9, 10, 11  # Metric
_DATA_POINTS = 1  # Gauge, Sum, Histogram, Summary
_SUM_MONOTONIC = 3  # Sum
_POINT_TIME = 3  # every data point: time_unix_nano
_NUMBER_AS_DOUBLE, _NUMBER_AS_INT, _NUMBER_ATTRIBUTES = 4, 6, 7  # NumberDataPoint
_HISTOGRAM_COUNT, _HISTOGRAM_SUM, _HISTOGRAM_ATTRIBUTES = 4, 5, 9  # HistogramDataPoint
_SUMMARY_COUNT, _SUMMARY_SUM, _SUMMARY_ATTRIBUTES = 4, 5, 7  # SummaryDataPoint
_KEY, _VALUE = 1, 2  # KeyValue
_STRING, _BOOL, _INT, _DOUBLE_VALUE, _BYTES = 1, 2, 3, 4, 7  # AnyValue

_KIND_BY_FIELD = {_GAUGE: "gauge", _SUM: "sum", _HISTOGRAM: "histogram",
                  _EXPONENTIAL_HISTOGRAM: "exponential_histogram", _SUMMARY: "summary"}


class OtlpError(ValueError):
    """The payload is not an OTLP MetricsData message."""


@attrs.frozen
class MetricPoint:
    """One data point of one pushed metric. ``value`` is a gauge's or sum's number, or a
    histogram's or summary's sum (its ``count`` beside it)."""

    name: str
    kind: str  # gauge, sum, histogram, exponential_histogram or summary
    value: float | int | None
    time_unix_nano: int
    attributes: dict[str, Any] = attrs.field(factory=dict)
    resource: dict[str, Any] = attrs.field(factory=dict)
    count: int | None = None  # histograms and summaries
    monotonic: bool | None = None  # sums


def _fields(data: bytes | memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field: an int for varints and fixed numbers,
    a memoryview for length-delimited ones."""
    view = memoryview(data)
    end = len(view)
    at = 0
    while at < end:
        key, at = _varint(view, at)
        number, wire = key >> 3, key & 7
        value: Any
        if number == 0:
            raise OtlpError(f"field number 0 at byte {at}")
        if wire == _VARINT:
            value, at = _varint(view, at)
        elif wire == _FIXED64:
            if at + 8 > end:
                raise OtlpError("a fixed64 field runs past the end")
            value = _UINT64.unpack_from(view, at)[0]
            at += 8
        elif wire == _LENGTH:
            size, at = _varint(view, at)
            if at + size > end:
                raise OtlpError("a length-delimited field runs past the end")
            value = view[at:at + size]
            at += size
        elif wire == _FIXED32:
            if at + 4 > end:
                raise OtlpError("a fixed32 field runs past the end")
            value = int.from_bytes(view[at:at + 4], "little")
            at += 4
        else:
            raise OtlpError(f"wire type {wire} (groups or unknown) at byte {at}")
        yield number, wire, value


def _varint(view: memoryview, at: int) -> tuple[int, int]:
    result = shift = 0
    end = len(view)
    while True:
        if at >= end:
            raise OtlpError("a varint runs past the end")
        byte = view[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7
        if shift > 63:
            raise OtlpError("a varint longer than 10 bytes")


def _text(value: Any) -> str:
    if not isinstance(value, memoryview):
        raise OtlpError("a string field is not length-delimited")
    try:
        return bytes(value).decode()
    except UnicodeDecodeError:
        raise OtlpError("a string field is not UTF-8") from None


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _any_value(data: memoryview) -> Any:
    for number, _, value in _fields(data):
        if number == _STRING:
            return _text(value)
        if number == _BOOL:
            return bool(value)
        if number == _INT:
            return _signed(value)
        if number == _DOUBLE_VALUE:
            return _double(value)
        if number == _BYTES and isinstance(value, memoryview):
            return bytes(value)
    return None  # arrays and key-value lists are not read


def _attribute(data: memoryview) -> tuple[str, Any]:
    key, found = "", None
    for number, _, value in _fields(data):
        if number == _KEY:
            key = _text(value)
        elif number == _VALUE and isinstance(value, memoryview):
            found = _any_value(value)
    return key, found


def _double(value: int) -> float:
    return float(_DOUBLE.unpack(_UINT64.pack(value))[0])


def _point(name: str, kind: str, data: memoryview, resource: dict[str, Any],
           monotonic: bool | None) -> MetricPoint:
    number_point = kind in ("gauge", "sum")
    attributes_field = (_NUMBER_ATTRIBUTES if number_point else
                        _SUMMARY_ATTRIBUTES if kind == "summary" else _HISTOGRAM_ATTRIBUTES)
    # proto3: an absent field is its zero, except a number point's value (a oneof) and a
    # histogram's sum (optional), which may be truly absent.
    value: float | int | None = 0.0 if kind == "summary" else None
    count: int | None = None if number_point else 0
    time_unix_nano = 0
    attributes: dict[str, Any] = {}
    for number, wire, field in _fields(data):
        if number == _POINT_TIME and wire == _FIXED64:
            time_unix_nano = field
        elif number == attributes_field and isinstance(field, memoryview):
            key, found = _attribute(field)
            attributes[key] = found
        elif number_point and number == _NUMBER_AS_DOUBLE and wire == _FIXED64:
            value = _double(field)
        elif number_point and number == _NUMBER_AS_INT and wire == _FIXED64:
            value = _signed(field)
        elif not number_point and number == _HISTOGRAM_COUNT and wire == _FIXED64:  # summary's too
            count = field
        elif not number_point and number == _HISTOGRAM_SUM and wire == _FIXED64:  # summary's too
            value = _double(field)
    return MetricPoint(name, kind, value, time_unix_nano, attributes, resource, count,
                       monotonic if kind == "sum" else None)


def _metric(data: memoryview, resource: dict[str, Any]) -> Iterator[MetricPoint]:
    name = ""
    bodies: list[tuple[str, memoryview]] = []
    for number, _, value in _fields(data):
        if number == _NAME:
            name = _text(value)
        elif number in _KIND_BY_FIELD and isinstance(value, memoryview):
            bodies.append((_KIND_BY_FIELD[number], value))
    for kind, body in bodies:
        points = [value for number, _, value in _fields(body)
                  if number == _DATA_POINTS and isinstance(value, memoryview)]
        monotonic = None
        if kind == "sum":
            monotonic = any(bool(value) for number, wire, value in _fields(body)
                            if number == _SUM_MONOTONIC and wire == _VARINT)
        if kind == "exponential_histogram":  # its points differ: only name and time are read
            for point in points:
                times = [v for n, w, v in _fields(point) if n == _POINT_TIME and w == _FIXED64]
                yield MetricPoint(name, kind, None, times[0] if times else 0, {}, resource)
            continue
        for point in points:
            yield _point(name, kind, point, resource, monotonic)


def decode_metrics(payload: bytes) -> list[MetricPoint]:
    """Every data point in an OTLP ``MetricsData`` payload (already decompressed)."""
    points: list[MetricPoint] = []
    for number, _, resource_metrics in _fields(payload):
        if number != _RESOURCE_METRICS or not isinstance(resource_metrics, memoryview):
            continue
        resource: dict[str, Any] = {}
        scopes: list[memoryview] = []
        for inner, _, value in _fields(resource_metrics):
            if inner == _RESOURCE and isinstance(value, memoryview):
                for field, _, attribute in _fields(value):
                    if field == _RESOURCE_ATTRIBUTES and isinstance(attribute, memoryview):
                        key, found = _attribute(attribute)
                        resource[key] = found
            elif inner == _SCOPE_METRICS and isinstance(value, memoryview):
                scopes.append(value)
        for scope in scopes:
            for inner, _, metric in _fields(scope):
                if inner == _METRICS and isinstance(metric, memoryview):
                    points.extend(_metric(metric, resource))
    return points
