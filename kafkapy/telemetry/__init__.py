"""Client telemetry (KIP-714): clients push their metrics, tests read them (``Broker.telemetry()``).
Enabled with ``kafkapy.modules=telemetry``; see docs/telemetry.md."""

from kafkapy.telemetry.module import CLIENT_METRICS, TelemetryModule, TelemetryPush
from kafkapy.telemetry.otlp import MetricPoint, OtlpError, decode_metrics
from kafkapy.telemetry.subscriptions import Subscription, SubscriptionError, parse_subscription

__all__ = ["CLIENT_METRICS", "MetricPoint", "OtlpError", "Subscription", "SubscriptionError",
           "TelemetryModule", "TelemetryPush", "decode_metrics", "parse_subscription"]
