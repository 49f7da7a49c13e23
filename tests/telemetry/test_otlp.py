"""kafkapy's OTLP reader against protobuf's own encoder (opentelemetry-proto): every data point
of generated MetricsData messages read back; and arbitrary bytes only ever raise OtlpError."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.resource.v1 import resource_pb2

from kafkapy.telemetry.otlp import MetricPoint, OtlpError, decode_metrics

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
times = st.integers(0, 2**64 - 1)
attribute_values = st.one_of(names, st.booleans(), st.integers(-2**63, 2**63 - 1),
                             st.floats(allow_nan=False), st.binary(max_size=8))
attributes = st.dictionaries(names, attribute_values, max_size=3)


def key_values(values: dict[str, Any]) -> list[common_pb2.KeyValue]:
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            any_value = common_pb2.AnyValue(bool_value=value)
        elif isinstance(value, int):
            any_value = common_pb2.AnyValue(int_value=value)
        elif isinstance(value, float):
            any_value = common_pb2.AnyValue(double_value=value)
        elif isinstance(value, bytes):
            any_value = common_pb2.AnyValue(bytes_value=value)
        else:
            any_value = common_pb2.AnyValue(string_value=value)
        out.append(common_pb2.KeyValue(key=key, value=any_value))
    return out


@st.composite
def metrics(draw: st.DrawFn) -> tuple[metrics_pb2.Metric, list[tuple[Any, ...]]]:
    """A Metric of one kind with its points, and what the reader must give for each point."""
    name = draw(names)
    kind = draw(st.sampled_from(["gauge", "sum", "histogram", "summary"]))
    expected: list[tuple[Any, ...]] = []
    metric = metrics_pb2.Metric(name=name, description=draw(names), unit="ms")
    for _ in range(draw(st.integers(0, 3))):
        time, point_attributes = draw(times), draw(attributes)
        if kind in ("gauge", "sum"):
            value = draw(st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False)))
            number = metrics_pb2.NumberDataPoint(time_unix_nano=time, attributes=key_values(point_attributes),
                                                 start_time_unix_nano=1)
            if isinstance(value, int):
                number.as_int = value
            else:
                number.as_double = value
            (metric.gauge if kind == "gauge" else metric.sum).data_points.append(number)
            expected.append((name, kind, value, time, point_attributes, None))
        else:
            count, total = draw(st.integers(0, 2**64 - 1)), draw(st.floats(allow_nan=False))
            point_type = (metrics_pb2.HistogramDataPoint if kind == "histogram"
                          else metrics_pb2.SummaryDataPoint)
            point = point_type(time_unix_nano=time, count=count, sum=total,
                               attributes=key_values(point_attributes))
            (metric.histogram if kind == "histogram" else metric.summary).data_points.append(point)
            expected.append((name, kind, total, time, point_attributes, count))
    if kind == "sum":
        metric.sum.is_monotonic = draw(st.booleans())
    return metric, expected


@settings(max_examples=150, deadline=None)
@given(resources=st.lists(st.tuples(attributes, st.lists(metrics(), max_size=4)), max_size=3))
def test_every_point_of_an_encoded_message_is_read(resources: list[Any]) -> None:
    message = metrics_pb2.MetricsData()
    expected: list[MetricPoint] = []
    for resource_attributes, resource_metrics in resources:
        scope = metrics_pb2.ScopeMetrics(scope=common_pb2.InstrumentationScope(name="librdkafka"))
        for metric, points in resource_metrics:
            scope.metrics.append(metric)
            monotonic = metric.sum.is_monotonic if metric.HasField("sum") else None
            expected += [MetricPoint(name, kind, value, time, point_attributes, resource_attributes,
                                     count, monotonic)
                         for name, kind, value, time, point_attributes, count in points]
        resource = resource_pb2.Resource(attributes=key_values(resource_attributes))
        message.resource_metrics.append(metrics_pb2.ResourceMetrics(resource=resource, scope_metrics=[scope]))
    assert decode_metrics(message.SerializeToString()) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_read_or_refused_with_one_error(data: bytes) -> None:
    try:
        points = decode_metrics(data)
    except OtlpError as exc:
        assert str(exc)
    else:
        assert all(isinstance(point, MetricPoint) for point in points)


def test_a_truncated_message_is_refused() -> None:
    metric = metrics_pb2.Metric(name="org.apache.kafka.producer.record.queue.time.avg")
    metric.gauge.data_points.append(metrics_pb2.NumberDataPoint(as_double=1.5, time_unix_nano=7))
    data = metrics_pb2.MetricsData(resource_metrics=[metrics_pb2.ResourceMetrics(
        scope_metrics=[metrics_pb2.ScopeMetrics(metrics=[metric])])]).SerializeToString()
    assert decode_metrics(data)[0].value == 1.5
    try:
        decode_metrics(data[:-3])
    except OtlpError as exc:
        assert "runs past the end" in str(exc)
    else:
        raise AssertionError("a truncated payload was read")
