"""Client telemetry (KIP-714): clients push their metrics, tests read them (``Broker.telemetry()``).
Enabled with ``kafkapy.modules=telemetry``; see docs/telemetry.md."""

from kafkapy.telemetry.client_metrics import CLIENT_METRICS, ClientMetricsModule
from kafkapy.telemetry.module import TelemetryModule, TelemetryPush
from kafkapy.telemetry.otlp import MetricPoint, OtlpError, decode_metrics
from kafkapy.telemetry.subscriptions import Subscription, SubscriptionError, parse_subscription

__all__ = ["CLIENT_METRICS", "ClientMetricsModule", "MetricPoint", "OtlpError", "Subscription",
           "SubscriptionError", "TelemetryModule", "TelemetryPush", "decode_metrics", "parse_subscription"]
