"""GROUP config resources (Kafka 4's group configs) over DescribeConfigs / AlterConfigs /
IncrementalAlterConfigs: set, described with Kafka's sources, refused with Kafka's codes, seen by
every broker of a cluster, and applied to KIP-848 consumer groups' sessions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy import VirtualClock
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType, GroupsModule
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import BrokerFactory, wait_until

GROUP = 32  # Kafka's ConfigResource.Type.GROUP
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5  # Kafka's DescribeConfigsResponse.ConfigSource
SET, DELETE = 0, 1
INT, STRING = 3, 2  # DescribeConfigsResponse.ConfigType
SHORT_BOUNDS = {"group.consumer.min.session.timeout.ms": 1000,
                "group.consumer.min.heartbeat.interval.ms": 100,
                "group.consumer.heartbeat.interval.ms": 5000}  # Kafka's (the embedded Broker's is 500)


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory(SHORT_BOUNDS)


@pytest.fixture
def admin(broker: Broker) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


def alter(bootstrap: str, name: str, configs: dict[str, str | None], op: int = SET) -> tuple[int, str | None]:
    ops = [{"name": key, "config_operation": op, "value": value} for key, value in configs.items()]
    with SimpleClient(bootstrap) as client:
        answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": GROUP, "resource_name": name, "configs": ops}],
            "validate_only": False})
    (response,) = answer["responses"]
    return response["error_code"], response["error_message"]


def describe(bootstrap: str, name: str, synonyms: bool = True) -> dict[str, dict[str, Any]]:
    with SimpleClient(bootstrap) as client:
        answer = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": GROUP, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": synonyms, "include_documentation": False})
    (result,) = answer["results"]
    assert result["error_code"] == ErrorCode.NONE, result
    return {entry["name"]: entry for entry in result["configs"]}


def test_kafka_python_sets_describes_and_deletes_group_configs(admin: Any) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.GROUP, "workers", configs={
        "share.auto.offset.reset": (AlterConfigOp.SET, "earliest"),
        "consumer.session.timeout.ms": (AlterConfigOp.SET, "8000")})
    answer = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    assert answer == {"group": {"workers": "OK"}}
    answer = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, "workers")])
    modified = answer["group"]["workers"]  # kafka-python's default filter: what the group set
    assert {k: (e["value"], e["config_source"]) for k, e in modified.items()} == {
        "share.auto.offset.reset": ("earliest", "DYNAMIC_GROUP_CONFIG"),
        "consumer.session.timeout.ms": ("8000", "DYNAMIC_GROUP_CONFIG")}
    everything = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, "workers")],
                                        config_filter="all")["group"]["workers"]
    assert everything["consumer.heartbeat.interval.ms"]["value"] == "5000"
    assert everything["consumer.heartbeat.interval.ms"]["config_source"] == "DEFAULT_CONFIG"
    removed = ConfigResource(ConfigResourceType.GROUP, "workers", configs={
        "share.auto.offset.reset": (AlterConfigOp.DELETE, None)})
    admin.alter_configs([removed], raise_on_unknown=False, incremental=True)
    answer = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, "workers")])
    assert set(answer["group"]["workers"]) == {"consumer.session.timeout.ms"}


def test_alter_configs_replaces_a_groups_whole_config(broker: Broker) -> None:
    assert alter(broker.bootstrap_servers, "g", {"share.auto.offset.reset": "earliest"}) == (0, None)
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.ALTER_CONFIGS, 2, {"resources": [{
            "resource_type": GROUP, "resource_name": "g",
            "configs": [{"name": "share.record.lock.duration.ms", "value": "20000"}]}],
            "validate_only": False})
    assert answer["responses"][0]["error_code"] == ErrorCode.NONE
    entries = describe(broker.bootstrap_servers, "g")
    sources = {k: (e["value"], e["config_source"]) for k, e in entries.items()}
    assert sources["share.record.lock.duration.ms"] == ("20000", GROUP_CONFIG)
    assert sources["share.auto.offset.reset"] == ("latest", DEFAULT_CONFIG)


def test_describe_sources_on_the_wire(kafka_broker_factory: BrokerFactory) -> None:
    """A set key: GROUP_CONFIG with the broker's value as its DEFAULT_CONFIG synonym; an unset key:
    the broker's value (its setting, not Kafka's default, when it has one) as DEFAULT_CONFIG."""
    broker = kafka_broker_factory({**SHORT_BOUNDS, "share.auto.offset.reset": "earliest",
                                   "group.consumer.heartbeat.interval.ms": 3000})
    assert alter(broker.bootstrap_servers, "g", {"consumer.session.timeout.ms": "50000"}) == (0, None)
    entries = describe(broker.bootstrap_servers, "g")
    assert sorted(entries) == ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
                               "share.auto.offset.reset", "share.heartbeat.interval.ms",
                               "share.isolation.level", "share.record.lock.duration.ms",
                               "share.session.timeout.ms"]
    session = entries["consumer.session.timeout.ms"]
    assert (session["value"], session["config_source"], session["read_only"], session["config_type"]) == (
        "50000", GROUP_CONFIG, False, INT)
    assert [(s["value"], s["source"]) for s in session["synonyms"]] == [("50000", GROUP_CONFIG),
                                                                       ("45000", DEFAULT_CONFIG)]
    reset = entries["share.auto.offset.reset"]
    assert (reset["value"], reset["config_source"], reset["config_type"]) == (
        "earliest", DEFAULT_CONFIG, STRING)
    assert entries["consumer.heartbeat.interval.ms"]["value"] == "3000"
    plain = describe(broker.bootstrap_servers, "g", synonyms=False)
    assert plain["share.auto.offset.reset"]["synonyms"] == []


@pytest.mark.parametrize(("name", "config", "code", "message"), [
    ("g", {"session.timeout.ms": "9000"}, ErrorCode.INVALID_CONFIG,
     "Unknown group config name: session.timeout.ms"),
    ("g", {"consumer.session.timeout.ms": "soon"}, ErrorCode.INVALID_CONFIG, "Not a number of type INT"),
    ("g", {"consumer.session.timeout.ms": "0"}, ErrorCode.INVALID_CONFIG, "Value must be at least 1"),
    ("g", {"consumer.session.timeout.ms": "500"}, ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ("g", {"consumer.session.timeout.ms": "70000"}, ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ("g", {"consumer.session.timeout.ms": "2000"}, ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
    ("g", {"share.record.lock.duration.ms": "5000"}, ErrorCode.INVALID_CONFIG,
     "share.record.lock.duration.ms must be greater than or equal to "
     "group.share.min.record.lock.duration.ms"),
    ("g", {"share.auto.offset.reset": "by_duration:1h"}, ErrorCode.INVALID_CONFIG,
     "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
    ("g", {"share.isolation.level": "serializable"}, ErrorCode.INVALID_CONFIG,
     "String must be one of: read_committed, read_uncommitted"),
    ("g", {"share.auto.offset.reset": None}, ErrorCode.INVALID_REQUEST, "Null value not supported"),
    ("", {"share.auto.offset.reset": "earliest"}, ErrorCode.INVALID_REQUEST,
     "Default group resources are not allowed."),
])
def test_what_kafka_refuses_gets_its_codes(broker: Broker, name: str, config: dict[str, str | None],
                                           code: ErrorCode, message: str) -> None:
    error_code, error_message = alter(broker.bootstrap_servers, name, config)
    assert error_code == code and error_message is not None and message in error_message, error_message
    entries = describe(broker.bootstrap_servers, "g")  # nothing was stored
    assert all(entry["config_source"] == DEFAULT_CONFIG for entry in entries.values())


def applied(broker: Broker, member: Broker, group: str, key: str) -> Any:
    """The group's value of ``key`` as ``member``'s groups module applies it (not the store's)."""
    assert member.runtime is not None
    (groups,) = [m for m in member.runtime.modules if isinstance(m, GroupsModule)]
    return broker._on_loop(lambda: groups.group_configs.value(group, key))


def test_a_change_through_one_broker_is_applied_by_the_other() -> None:
    with Broker(SHORT_BOUNDS, brokers=2) as cluster:
        first, second = cluster.brokers
        assert alter(first.bootstrap_servers, "g", {"share.auto.offset.reset": "earliest"}) == (0, None)
        wait_until(lambda: applied(cluster, second, "g", "share.auto.offset.reset") == "earliest",
                   what="the other broker applies the change")
        assert describe(second.bootstrap_servers, "g")["share.auto.offset.reset"]["value"] == "earliest"
        assert alter(second.bootstrap_servers, "g", {"share.auto.offset.reset": None}, op=DELETE) == (0, None)
        wait_until(lambda: applied(cluster, first, "g", "share.auto.offset.reset") == "latest",
                   what="the first broker applies the delete")


def _heartbeat(client: SimpleClient, group: str, member_id: str, epoch: int, **fields: Any) -> Any:
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None, **fields}
    return client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)


def _members(client: SimpleClient, group: str) -> list[Any]:
    body = {"group_ids": [group], "include_authorized_operations": False}
    members: list[Any] = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body)["groups"][0]["members"]
    return members


def _join(client: SimpleClient, group: str) -> Any:
    wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 3, {
        "key": group, "key_type": CoordinatorKeyType.GROUP})["error_code"] == ErrorCode.NONE,
        what="a coordinator")
    answer = _heartbeat(client, group, str(uuid.uuid4()), 0, rebalance_timeout_ms=10000,
                        subscribed_topic_names=["t"], topic_partitions=[])
    assert answer["error_code"] == ErrorCode.NONE, answer
    return answer


def test_a_consumer_group_member_is_fenced_after_its_groups_session_timeout(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({**SHORT_BOUNDS, "offsets.topic.num.partitions": 1})
    broker.seed({"t": {"partitions": 1}})
    assert alter(broker.bootstrap_servers, "short", {"consumer.session.timeout.ms": "2000",
                                                     "consumer.heartbeat.interval.ms": "500"}) == (0, None)
    with SimpleClient(broker.bootstrap_servers) as client:
        assert _join(client, "short")["heartbeat_interval_ms"] == 500
        assert _join(client, "plain")["heartbeat_interval_ms"] == 5000  # the broker's
        kafka_clock.advance(1.5)
        assert len(_members(client, "short")) == 1
        kafka_clock.advance(1.0)
        wait_until(lambda: _members(client, "short") == [], what="the member of 'short' fenced")
        assert len(_members(client, "plain")) == 1  # the broker's 45 s session still runs
        kafka_clock.advance(45)
        wait_until(lambda: _members(client, "plain") == [], what="the member of 'plain' fenced")


def test_authorization_is_on_the_group_resource() -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS are asked of the GROUP resource, and a refusal is
    GROUP_AUTHORIZATION_FAILED (Kafka's ConfigHelper), not CLUSTER_AUTHORIZATION_FAILED."""
    config = {"authorizer.class.name": "allowlist", "allowlist.rules": "*@127.0.0.1:DESCRIBE_CONFIGS"}
    with Broker(config) as b:
        assert alter(b.bootstrap_servers, "g", {"share.auto.offset.reset": "earliest"})[0] == \
            ErrorCode.GROUP_AUTHORIZATION_FAILED
        entry = describe(b.bootstrap_servers, "g")["share.auto.offset.reset"]
        assert entry["config_source"] == DEFAULT_CONFIG


_KEYS = st.sampled_from(["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                         "share.session.timeout.ms", "share.heartbeat.interval.ms",
                         "share.record.lock.duration.ms", "share.auto.offset.reset", "share.isolation.level",
                         "session.timeout.ms", ""])
_WORDS = st.sampled_from(["earliest", "latest", "read_committed", "read_uncommitted", " 50000 "])
_VALUES = st.one_of(st.integers(-(2**40), 2**40).map(str), _WORDS, st.text(max_size=12))


@pytest.fixture(scope="module")
def fuzz_broker() -> Iterator[Broker]:
    with Broker(SHORT_BOUNDS) as running:
        yield running


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4))
def test_any_config_is_stored_as_given_or_refused_with_kafkas_codes(fuzz_broker: Broker,
                                                                    config: dict[str, str]) -> None:
    address = fuzz_broker.bootstrap_servers
    code, message = alter(address, "fuzz", dict(config))
    assert code in (ErrorCode.NONE, ErrorCode.INVALID_CONFIG), (code, message)
    entries = describe(address, "fuzz")
    own = {name: e["value"] for name, e in entries.items() if e["config_source"] == GROUP_CONFIG}
    if code == ErrorCode.NONE:
        assert own == config
        assert alter(address, "fuzz", dict.fromkeys(config), op=DELETE) == (ErrorCode.NONE, None)
    else:
        assert own == {}


def test_on_zookeeper_kafkas_znode_other_brokers_and_restarts(zk_connect: str) -> None:
    """Stored at /config/groups/<sanitized id> with a change notification, as Kafka's ZooKeeper
    layout keeps entity configs; the other broker follows, and a restarted broker reads it."""
    import json

    config = {**SHORT_BOUNDS, "zookeeper.connect": zk_connect}
    with Broker({**config, "broker.id": "1"}) as first, Broker({**config, "broker.id": "2"}) as second:
        assert alter(first.bootstrap_servers, "team/a", {"share.auto.offset.reset": "earliest"}) == (0, None)
        assert first.store is not None
        zk = first.store.client  # type: ignore[attr-defined]
        assert json.loads(zk.get("/config/groups/team%2Fa")[0]) == {
            "version": 1, "config": {"share.auto.offset.reset": "earliest"}}
        notes = [json.loads(zk.get(f"/config/changes/{n}")[0]) for n in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "groups/team%2Fa"} in notes
        wait_until(lambda: applied(second, second, "team/a", "share.auto.offset.reset") == "earliest",
                   what="the other broker applies it")
    with Broker({**config, "broker.id": "2"}) as again:
        entry = describe(again.bootstrap_servers, "team/a")["share.auto.offset.reset"]
        assert (entry["value"], entry["config_source"]) == ("earliest", GROUP_CONFIG)
