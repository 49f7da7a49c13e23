"""`kafkapy client-metrics`, kafka-client-metrics.sh's flags and output, against a broker with the
telemetry module; and the subscriptions listed by ListConfigResources through kafka-python's admin."""

from __future__ import annotations

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.testing import BrokerFactory


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory({"kafkapy.modules": "telemetry"})


def run(capsys: pytest.CaptureFixture[str], broker: Broker, *args: str) -> tuple[int, str, str]:
    code = main(["client-metrics", "--bootstrap-server", broker.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_alter_describe_list_delete(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, broker, "--alter", "--name", "apps", "--metrics",
                         "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "1000",
                         "--match", "client_id=app-.*")
    assert (code, out, err) == (0, "Altered client metrics config for apps.\n", "")
    run(capsys, broker, "--alter", "--name", "all", "--metrics", "*")
    assert run(capsys, broker, "--list") == (0, "all\napps\n", "")
    code, out, _ = run(capsys, broker, "--describe", "--name", "apps")
    assert (code, out) == (0, "Client metrics configs for apps are:\n  interval.ms=1000\n"
                              "  match=client_id=app-.*\n"
                              "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.\n")
    code, out, _ = run(capsys, broker, "--describe")  # every subscription
    assert out.count("Client metrics configs for") == 2
    # An empty value deletes that key only.
    run(capsys, broker, "--alter", "--name", "apps", "--match", "")
    assert "match=" not in run(capsys, broker, "--describe", "--name", "apps")[1]
    assert run(capsys, broker, "--delete", "--name", "apps") == (
        0, "Deleted client metrics config for apps.\n", "")
    assert run(capsys, broker, "--list") == (0, "all\n", "")
    held = broker._on_loop(lambda: [name for module in broker._telemetry_modules()
                                    for name in module.subscriptions])
    assert held == ["all"]  # gone from the broker's subscriptions too


def test_refusals_are_one_line(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, broker, "--alter", "--name", "x", "--interval", "5")
    assert (code, err) == (1, "kafkapy client-metrics: IncrementalAlterConfigs failed: INVALID_REQUEST: "
                              "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 "
                              "(1 hour)\n")
    code, _, err = run(capsys, broker, "--alter", "--metrics", "*")
    assert (code, err) == (1, "kafkapy client-metrics: --alter needs --name or --generate-name\n")
    code, out, _ = run(capsys, broker, "--alter", "--generate-name", "--metrics", "*")
    assert code == 0 and out.startswith("Altered client metrics config for ")


def test_kafka_python_lists_the_subscriptions(broker: Broker) -> None:
    from kafka.admin import KafkaAdminClient

    broker.set_client_metrics("b-sub", metrics=["x."])
    broker.set_client_metrics("a-sub", metrics=["*"])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    try:
        assert admin.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["a-sub", "b-sub"]}
    finally:
        admin.close()


def configs(capsys: pytest.CaptureFixture[str], broker: Broker, *args: str) -> tuple[int, str, str]:
    code = main(["configs", "--bootstrap-server", broker.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_kafka_configs_entity_type_client_metrics(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    """kafka-configs.sh manages the same subscriptions: ``--entity-type client-metrics`` (or
    ``--client-metrics``), with its lines."""
    code, out, err = configs(capsys, broker, "--alter", "--entity-type", "client-metrics", "--entity-name",
                             "apps", "--add-config",
                             "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],interval.ms=1000")
    assert (code, out, err) == (0, "Completed updating config for client-metric apps.\n", "")
    assert configs(capsys, broker, "--alter", "--client-metrics", "all", "--add-config", "metrics=*")[0] == 0
    code, out, _ = configs(capsys, broker, "--describe", "--client-metrics", "apps")
    assert (code, out) == (0, "Dynamic configs for client-metric apps are:\n"
                              "  interval.ms=1000 sensitive=false synonyms={}\n"
                              "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer. "
                              "sensitive=false synonyms={}\n")
    # Without a name, every subscription (ListClientMetricsResources), as kafka-configs.sh does.
    code, out, _ = configs(capsys, broker, "--describe", "--entity-type", "client-metrics")
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("Dynamic")] == [
        "Dynamic configs for client-metric all are:", "Dynamic configs for client-metric apps are:"]
    # Only keys the subscription sets can be deleted; deleting them all removes it.
    code, out, err = configs(capsys, broker, "--alter", "--client-metrics", "apps",
                             "--delete-config", "match")
    assert (code, out) == (1, "") and "Invalid config(s): match" in err
    assert configs(capsys, broker, "--alter", "--client-metrics", "apps", "--delete-config",
                   "metrics,interval.ms")[0] == 0
    assert run(capsys, broker, "--list") == (0, "all\n", "")
    # The broker's checks answer as they do for kafka-client-metrics.sh.
    code, _, err = configs(capsys, broker, "--alter", "--client-metrics", "bad",
                           "--add-config", "interval.ms=5")
    assert code == 1 and "interval must be between 100 and 3600000" in err
