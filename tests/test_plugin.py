"""The `kafkapy` pytest plugin: its fixtures used directly, and seen from a fresh pytest run."""

from __future__ import annotations

import socket
import struct

import pytest

from kafkapy.embedded import Broker
from kafkapy.protocol import decode_response, encode_request
from kafkapy.testing import BrokerFactory, config_from_kwargs

pytest_plugins = ["pytester"]

# Inner runs skip hypothesis's plugin (a second of imports each) and keep test order.
QUICK = ("-p", "no:hypothesispytest", "-p", "no:randomly")


def broker_metadata(bootstrap: str) -> list[dict[str, object]]:
    host, _, port = bootstrap.rpartition(":")
    frame = encode_request(1010, 0, 1, "test-plugin", {"node_ids": []})
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        reader = sock.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        body = reader.read(size)
    return [dict(b) for b in decode_response(body, 1010, 0).body["brokers"]]


def accepting(bootstrap: str) -> bool:
    host, _, port = bootstrap.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return False
    return True


# --- the fixtures, used directly ------------------------------------------------------------

def test_kafka_broker_is_started(kafka_broker: Broker) -> None:
    assert kafka_broker.bootstrap_servers.startswith("127.0.0.1:")
    (broker,) = broker_metadata(kafka_broker.bootstrap_servers)
    assert broker["node_id"] == kafka_broker.broker_id


def test_factory_accepts_a_mapping_and_kwargs(kafka_broker_factory: BrokerFactory) -> None:
    first = kafka_broker_factory({"broker.id": 5, "tag.team": "a"})
    second = kafka_broker_factory(broker_id=6, advertise_private_api_keys=False)
    both = kafka_broker_factory({"broker.id": 1}, broker_id=8)  # kwargs win
    assert (first.broker_id, second.broker_id, both.broker_id) == (5, 6, 8)
    assert second.config["advertise.private.api.keys"] is False
    assert first.config.tags == {"team": "a"}
    assert len({first.bootstrap_servers, second.bootstrap_servers, both.bootstrap_servers}) == 3


def test_factory_gives_each_broker_of_a_cluster_its_rack(kafka_broker_factory: BrokerFactory) -> None:
    cluster = kafka_broker_factory(brokers=3, racks=["az0", "az1", None])
    assert [m.config["broker.rack"] for m in cluster.brokers] == ["az0", "az1", None]


def test_config_from_kwargs_translates_underscores() -> None:
    assert config_from_kwargs({"tag.my_tag": "x"}, broker_id=2, unknown_request_behavior="close") == {
        "tag.my_tag": "x", "broker.id": 2, "unknown.request.behavior": "close"}


def test_factory_reports_a_bad_config(kafka_broker_factory: BrokerFactory) -> None:
    from kafkapy.server.config import ConfigError

    with pytest.raises(ConfigError, match=r"broker\.id"):
        kafka_broker_factory(broker_id="nine")


# --- the plugin, as a user's suite sees it ------------------------------------------------

def test_plugin_is_registered_by_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_plugin(request):
            assert request.config.pluginmanager.has_plugin("kafkapy")
    """)
    pytester.runpytest(*QUICK).assert_outcomes(passed=1)


def test_fixtures_start_fresh_brokers_and_stop_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import socket

        import pytest

        seen = []

        def accepting(bootstrap):
            host, _, port = bootstrap.rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
            except OSError:
                return False
            return True

        @pytest.mark.parametrize("n", [1, 2])
        def test_fresh_broker(kafka_broker, n):
            assert accepting(kafka_broker.bootstrap_servers)
            seen.append(kafka_broker)

        def test_previous_brokers_stopped():
            assert len(seen) == 2 and seen[0] is not seen[1]
            assert seen[0].bootstrap_servers != seen[1].bootstrap_servers
            for broker in seen:
                assert not accepting(broker.bootstrap_servers)

        def test_factory(kafka_broker_factory):
            a = kafka_broker_factory({"broker.id": 11})
            b = kafka_broker_factory(broker_id=12, tag_zone="z")
            assert (a.broker_id, b.broker_id) == (11, 12)
            assert b.config.tags == {"zone": "z"}
            seen.extend([a, b])

        def test_factory_brokers_stopped():
            for broker in seen[2:]:
                assert not accepting(broker.bootstrap_servers)
    """)
    result = pytester.runpytest(*QUICK)
    result.assert_outcomes(passed=5)


def test_broker_stopped_after_failing_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import socket

        addresses = []

        def test_fails(kafka_broker):
            addresses.append(kafka_broker.bootstrap_servers)
            assert False, "on purpose"

        def test_it_stopped():
            host, _, port = addresses[0].rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
            except OSError:
                return
            raise AssertionError("still accepting")
    """)
    pytester.runpytest(*QUICK).assert_outcomes(passed=1, failed=1)


def test_stopped_broker_refuses(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory()
    address = broker.bootstrap_servers
    broker.close()
    assert not accepting(address)


def test_a_failing_test_reports_its_brokers_request_history(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        from kafkapy.client import SimpleClient

        def test_fails(kafka_broker):
            with SimpleClient(kafka_broker.bootstrap_servers, client_id="the-app") as client:
                client.request(3, 9, {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False})
            assert False, "the app misbehaved"

        def test_passes(kafka_broker):
            with SimpleClient(kafka_broker.bootstrap_servers, client_id="quiet-app") as client:
                client.request(3, 9, {"topics": []})
    """)
    result = pytester.runpytest(*QUICK)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*kafkapy request history (127.0.0.1:*)*",
                                 "*client 'the-app' Metadata v9 #1: UNKNOWN_TOPIC_OR_PARTITION"])
    assert "quiet-app" not in result.stdout.str()  # passing tests print nothing


def test_kafka_faults_fixture_scopes_rules_to_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        from kafkapy.client import ClientError, SimpleClient
        from kafkapy.faults import DropConnection, FaultRule
        from kafkapy.protocol.api_keys import ApiKey

        kept = []

        def test_faulted(kafka_faults, kafka_broker):
            kept.append(kafka_faults.add(FaultRule(DropConnection(), api=ApiKey.METADATA)))
            with SimpleClient(kafka_broker.bootstrap_servers) as client, pytest.raises(ClientError):
                client.request(ApiKey.METADATA, 9, {"topics": []})

        def test_rules_were_removed():
            assert kept[0].removed and kept[0].fired == 1
    """)
    pytester.runpytest(*QUICK).assert_outcomes(passed=2)


def test_kafka_faults_beside_kafka_cluster_are_the_clusters(pytester: pytest.Pytester) -> None:
    """kafka_faults asked for kafka_broker whatever else the test used: beside kafka_cluster it
    started a fourth broker of its own, and its rules reached no broker the test talked to."""
    pytester.makepyfile("""
        from kafkapy.client import SimpleClient
        from kafkapy.errors import ErrorCode
        from kafkapy.faults import ErrorAnswer, FaultRule
        from kafkapy.protocol.api_keys import ApiKey

        def test_cluster(kafka_cluster, kafka_faults):
            rule = FaultRule(ErrorAnswer(ErrorCode.TOPIC_AUTHORIZATION_FAILED), api=ApiKey.METADATA)
            handle = kafka_faults.add(rule)
            for member in kafka_cluster.brokers:
                with SimpleClient(member.bootstrap_servers) as client:
                    answer = client.request(ApiKey.METADATA, 9, {"topics": [{"name": "t"}],
                                                                 "allow_auto_topic_creation": False})
                    assert answer.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert handle.fired == 3

        def test_both(kafka_cluster, kafka_broker, kafka_faults):
            kafka_faults.add(FaultRule(ErrorAnswer(ErrorCode.NOT_CONTROLLER), api=ApiKey.CREATE_TOPICS))
            assert kafka_broker.faults.handles and not kafka_cluster.faults.handles
    """)
    pytester.runpytest(*QUICK).assert_outcomes(passed=2)


def test_kafka_cluster_and_the_seed_marker_in_a_fresh_run(pytester: pytest.Pytester) -> None:
    """The marker is registered (--strict-markers passes), seeds the fixture's brokers (the
    closest marker last), and a failing cluster test reports each broker's history."""
    pytester.makepyfile("""
        import pytest
        from kafkapy.client import SimpleClient

        pytestmark = pytest.mark.kafka_seed({"module-wide": {}})

        @pytest.mark.kafka_seed({"t": {"partitions": 2, "records": [{"value": "v", "partition": 1}]}})
        def test_seeded(kafka_cluster):
            assert [b.broker_id for b in kafka_cluster.brokers] == [0, 1, 2]
            assert sorted(kafka_cluster.runtime.cluster.topics) == ["module-wide", "t"]
            assert [(r.partition, r.value) for r in kafka_cluster.records("t")] == [(1, b"v")]

        def test_fails(kafka_cluster):
            with SimpleClient(kafka_cluster.brokers[2].bootstrap_servers, client_id="third") as client:
                client.request(3, 9, {"topics": []})
            assert False
    """)
    result = pytester.runpytest(*QUICK, "--strict-markers")
    result.assert_outcomes(passed=1, failed=1)
    sections = [line for line in result.stdout.lines if "kafkapy request history" in line]
    assert len(sections) == 3, result.stdout.str()
    result.stdout.fnmatch_lines(["*client 'third' Metadata v9 #1: NONE*"])


def test_a_marker_or_clock_on_a_test_without_its_fixture_fails_it(pytester: pytest.Pytester) -> None:
    """A test's own kafka_seed, kafka_topic or kafka_strict marker acting through none of its
    fixtures did nothing and the test passed, and so did kafka_clock beside kafka_session_broker alone;
    a marker on the module still covers the tests it fits."""
    pytester.makepyfile("""
        import pytest

        pytestmark = pytest.mark.kafka_seed({"module-wide": {}})

        @pytest.mark.kafka_seed({"orders": {"partitions": 3}})
        def test_seed_on_a_topic_test(kafka_topic):
            pass

        @pytest.mark.kafka_topic(partitions=3)
        def test_topic_marker_on_a_broker_test(kafka_broker):
            pass

        @pytest.mark.kafka_strict
        def test_strict_without_a_broker(kafka_topic):
            pass

        def test_module_marker_on_a_topic_test(kafka_topic):
            pass

        @pytest.mark.kafka_strict
        def test_strict_on_a_factory(kafka_broker_factory):
            pass

        def test_a_clock_for_the_sessions_broker(kafka_clock, kafka_session_broker):
            pass  # advance() moved no broker of the test: the session's keeps real time
    """)
    result = pytester.runpytest(*QUICK)
    result.assert_outcomes(passed=2, errors=4)
    result.stdout.fnmatch_lines([  # each one line, no traceback
        "*ERROR at setup of test_seed_on_a_topic_test*",
        "@pytest.mark.kafka_seed acts through kafka_broker or kafka_cluster, which this test does not "
        "use: it would do nothing (give kafka_topic's topic with @pytest.mark.kafka_topic(...))",
        "*ERROR at setup of test_topic_marker_on_a_broker_test*",
        "@pytest.mark.kafka_topic acts through kafka_topic, which this test does not use: *",
        "*ERROR at setup of test_strict_without_a_broker*",
        "@pytest.mark.kafka_strict acts through kafka_broker or kafka_cluster or kafka_broker_factory,*",
        "*ERROR at setup of test_a_clock_for_the_sessions_broker*",
        "kafka_clock drives the brokers of kafka_broker, kafka_cluster, kafka_broker_factory and "
        "kafka_topic; kafka_session_broker keeps real time, *"])


def test_a_failing_kafka_topic_test_reports_the_session_brokers_requests_of_that_test(
        pytester: pytest.Pytester) -> None:
    """kafka_topic shares one broker across the session: a failing test's report shows the
    requests made while it ran, not those of the tests before it."""
    pytester.makepyfile("""
        from kafkapy.client import SimpleClient

        def ask(topic, client_id):
            with SimpleClient(topic.bootstrap_servers, client_id=client_id) as client:
                client.request(3, 9, {"topics": [{"name": topic.name}], "allow_auto_topic_creation": False})

        def test_earlier(kafka_topic):
            ask(kafka_topic, "earlier-app")

        def test_fails(kafka_topic):
            ask(kafka_topic, "the-app")
            assert False, "the app misbehaved"
    """)
    result = pytester.runpytest(*QUICK)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*kafkapy request history (127.0.0.1:*, the session's broker, during this test)*",
         "*client 'the-app' Metadata v9 #1: NONE"])
    assert "earlier-app" not in result.stdout.str()
