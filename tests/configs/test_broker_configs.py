"""Dynamic broker configs over the wire (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) with
real clients, and their effect on the acceptor without a restart."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request, fit_body
from kafkapy.quotas import QuotasModule
from kafkapy.testing import wait_until

TIMEOUT_MS = 10000
BROKER = 4
OK, CLUSTER_AUTH, INVALID_CONFIG, INVALID_REQUEST = 0, 31, 40, 42
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": "3", "max.connections.per.ip": "1000"}) as b:
        yield b


def _quotas(broker: Broker) -> QuotasModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, QuotasModule))


def _request(
    address: str, api_key: int, version: int, body: dict[str, Any], source: str | None = None
) -> Any:
    """One request over a socket of its own (bound to ``source`` if given); the response body."""
    host, _, port = address.rpartition(":")
    frame = encode_request(api_key, version, 7, "configs-tests", fit_body(api_key, "request", version, body))
    with socket.create_connection(
        (host, int(port)), timeout=10, source_address=(source, 0) if source else None
    ) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "closed"
            data += chunk
    return decode_response(data[4:], api_key, version).body


def _incremental(
    address: str,
    name: str,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool = False,
    resource_type: int = BROKER,
    source: str | None = None,
) -> tuple[int, str | None]:
    body = _request(
        address,
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                }
            ],
            "validate_only": validate_only,
        },
        source,
    )
    result = body["responses"][0]
    return result["error_code"], result["error_message"]


def _legacy(address: str, name: str, configs: dict[str, str | None]) -> tuple[int, str | None]:
    body = _request(
        address,
        33,
        2,
        {
            "resources": [
                {
                    "resource_type": BROKER,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "validate_only": False,
        },
    )
    result = body["responses"][0]
    return result["error_code"], result["error_message"]


def _describe(
    address: str,
    name: str,
    keys: list[str] | None = None,
    version: int = 4,
    resource_type: int = BROKER,
    source: str | None = None,
) -> tuple[int, str | None, dict[str, Any]]:
    body = _request(
        address,
        32,
        version,
        {
            "resources": [
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
            ],
            "include_synonyms": version >= 1,
            "include_documentation": True,
        },
        source,
    )
    result = body["results"][0]
    return result["error_code"], result["error_message"], {c["name"]: c for c in result["configs"]}


def test_kafka_python_describe_and_alter_a_broker(broker: Broker) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap_servers,
        client_id="kafkapy-configs",
        request_timeout_ms=TIMEOUT_MS,
        bootstrap_timeout_ms=TIMEOUT_MS,
    )
    try:
        resource = KpConfigResource(ConfigResourceType.BROKER, "3")
        everything = admin.describe_configs([resource], include_synonyms=True, config_filter="all")
        configs = everything["broker"]["3"]
        assert configs["max.connections"]["value"] == "2147483647"
        assert configs["max.connections"]["config_source"] == "DEFAULT_CONFIG"
        assert configs["max.connections"]["read_only"] is False
        assert configs["max.connections.per.ip"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert configs["broker.id"]["read_only"] is True
        # IncrementalAlterConfigs (the client's choice on a broker that has it)
        # kafka-python checks keys against the described ones; a listener's key is listed only once set
        result = admin.alter_configs(
            [
                KpConfigResource(
                    ConfigResourceType.BROKER,
                    "3",
                    {"max.connections": "500", "listener.name.plaintext.max.connection.creation.rate": "40"},
                )
            ],
            raise_on_unknown=False,
        )
        assert result == {"broker": {"3": "OK"}}
        modified = admin.describe_configs([resource], include_synonyms=True)["broker"]["3"]
        assert modified["max.connections"]["value"] == "500"
        assert modified["max.connections"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert [s["source"] for s in modified["max.connections"]["synonyms"]] == [
            "DYNAMIC_BROKER_CONFIG",
            "DEFAULT_CONFIG",
        ]
        quotas = _quotas(broker).connection_quotas
        assert quotas is not None and quotas.max_connections == 500
        assert quotas.listeners["PLAINTEXT"].rate.bound == 40.0
        # the legacy AlterConfigs replaces the whole set (the client re-sends the other keys)
        assert admin.alter_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "3", {"max.connections": "600"})], incremental=False
        ) == {"broker": {"3": "OK"}}
        assert quotas.max_connections == 600 and quotas.listeners["PLAINTEXT"].rate.bound == 40.0
        # an invalid value is refused with INVALID_REQUEST (Kafka 3.2+), and nothing changes
        bad = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "3", {"max.connections": "-5"})]
        )
        assert bad["broker"]["3"].startswith("[Error 42] InvalidRequestError")
        assert "max.connections" in bad["broker"]["3"] and quotas.max_connections == 600
    finally:
        admin.close()


def test_confluent_kafka_incremental_alter_over_the_cluster_default(broker: Broker) -> None:
    # confluent-kafka refuses an empty resource name itself, so the default is set over a plain socket
    assert _incremental(broker.bootstrap_servers, "", [("max.connection.creation.rate", 0, "25")]) == (
        OK,
        None,
    )
    quotas = _quotas(broker).connection_quotas
    assert quotas is not None and quotas.broker_rate.bound == 25.0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def describe() -> Any:
        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "3")], request_timeout=10)
        return next(iter(described.values())).result(timeout=10)["max.connection.creation.rate"]

    def alter(operation: Any, value: str | None) -> None:
        entry = ConfigEntry("max.connection.creation.rate", value, incremental_operation=operation)
        resource = ConfigResource(ResourceType.BROKER, "3", incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource], request_timeout=10).values():
            future.result(timeout=10)

    entry = describe()
    assert entry.value == "25" and entry.source == DYNAMIC_DEFAULT and not entry.is_read_only
    # a per-broker override wins over the default; deleting it falls back to the default
    alter(AlterConfigOpType.SET, "70")
    assert quotas.broker_rate.bound == 70.0
    entry = describe()
    assert entry.value == "70" and entry.source == DYNAMIC_BROKER
    alter(AlterConfigOpType.DELETE, None)
    assert quotas.broker_rate.bound == 25.0 and describe().source == DYNAMIC_DEFAULT
    # an invalid value: the client raises the broker's INVALID_REQUEST
    with pytest.raises(Exception, match="Not a number of type INT"):
        alter(AlterConfigOpType.SET, "fast")


def test_validation_and_error_codes(broker: Broker) -> None:
    a = broker.bootstrap_servers
    # Kafka 3.2+ (ConfigAdminManager.preprocess): a refused broker config is INVALID_REQUEST with
    # the validator's own message, for both alter APIs, before authorization
    code, message = _incremental(a, "3", [("max.connections", 0, "lots")])
    assert (code, message) == (
        INVALID_REQUEST, "Invalid value lots for configuration max.connections: Not a number of type INT")
    code, message = _incremental(a, "", [("broker.id", 0, "9")])
    assert (code, message) == (INVALID_REQUEST, "Cannot update these configs dynamically: Set(broker.id)")
    assert _legacy(a, "3", {"broker.id": "9"}) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: Set(broker.id)")
    assert _incremental(a, "7", [("max.connections", 0, "5")]) == (
        INVALID_REQUEST, "Unexpected broker id, expected 3, but received 7")
    assert _incremental(a, "x", [("max.connections", 0, "5")]) == (
        INVALID_REQUEST, "Node id must be an integer, but it is: x")
    assert _incremental(a, "3", [("no.such.key", 0, "1")])[0] == INVALID_REQUEST
    # the combination is judged: zero per IP needs overrides
    code, message = _incremental(a, "3", [("max.connections.per.ip", 0, "0")])
    assert code == INVALID_REQUEST and "max.connections.per.ip.overrides" in (message or "")
    assert _incremental(
        a, "3", [("max.connections.per.ip", 0, "0"), ("max.connections.per.ip.overrides", 0, "127.0.0.1:5")]
    ) == (OK, None)
    # only list-type keys take APPEND and SUBTRACT; none of these is one (overrides is a STRING in
    # Kafka), and Kafka refuses that with INVALID_CONFIG (ConfigAdminManager.prepareIncrementalConfigs)
    assert _incremental(a, "3", [("max.connections.per.ip.overrides", 2, "127.0.0.2:1")]) == (
        INVALID_CONFIG,
        "Config value append is not allowed for config key: max.connections.per.ip.overrides",
    )
    assert _incremental(a, "3", [("max.connections", 0, "5"), ("max.connections", 1, None)]) == (
        INVALID_REQUEST,
        "Error due to duplicate config keys",
    )
    assert _incremental(a, "3", [("max.connections", 0, None)]) == (
        INVALID_REQUEST,
        "Null value not supported for : max.connections",
    )
    # a resource type kafkapy does not serve
    assert _incremental(a, "g", [("retention.ms", 0, "5")], resource_type=3)[0] == INVALID_REQUEST
    assert _describe(a, "g", resource_type=3)[0] == INVALID_REQUEST
    # TOPIC resources are served (tests/configs/test_topic_configs.py); this topic does not exist
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _incremental(a, "t", [("retention.ms", 0, "5")], resource_type=2)[0] == unknown
    assert _describe(a, "t", resource_type=2)[0] == unknown
    # validate_only validates fully and changes nothing
    assert _incremental(a, "3", [("max.connections", 0, "-1")], validate_only=True)[0] == INVALID_REQUEST
    assert _incremental(a, "3", [("max.connections", 0, "9")], validate_only=True) == (OK, None)
    assert "max.connections" not in _describe(a, "")[2]
    assert _describe(a, "3", ["max.connections"])[2]["max.connections"]["config_source"] == DEFAULT
    # DELETE of a key that is not set is a no-op
    assert _incremental(a, "", [("max.connections", 1, None)]) == (OK, None)


def test_describe_sources_and_the_default_resource(broker: Broker) -> None:
    a = broker.bootstrap_servers
    assert _incremental(a, "", [("max.connections", 0, "300")]) == (OK, None)
    assert _incremental(a, "3", [("max.connections", 0, "200")]) == (OK, None)
    code, _, default = _describe(a, "")
    assert code == OK and list(default) == ["max.connections"]
    assert default["max.connections"]["value"] == "300"
    assert default["max.connections"]["config_source"] == DYNAMIC_DEFAULT
    _, _, mine = _describe(a, "3", ["max.connections", "max.connections.per.ip", "broker.id"])
    assert set(mine) == {"max.connections", "max.connections.per.ip", "broker.id"}
    entry = mine["max.connections"]
    assert (entry["value"], entry["config_source"], entry["read_only"], entry["config_type"]) == (
        "200",
        2,
        False,
        3,
    )
    assert [(s["source"], s["value"]) for s in entry["synonyms"]] == [
        (DYNAMIC_BROKER, "200"),
        (DYNAMIC_DEFAULT, "300"),
        (DEFAULT, "2147483647"),
    ]
    assert entry["documentation"]
    assert mine["max.connections.per.ip"]["config_source"] == STATIC
    assert mine["broker.id"]["read_only"] is True
    # v0 has is_default instead of a source
    _, _, old = _describe(a, "3", ["quota.window.num"], version=0)
    assert old["quota.window.num"]["is_default"] is True
    # AlterConfigs with an empty set clears the broker's overrides: the default applies again
    assert _legacy(a, "3", {}) == (OK, None)
    quotas = _quotas(broker).connection_quotas
    assert quotas is not None and quotas.max_connections == 300


def test_authorization_goes_through_the_authorizer() -> None:
    config = {
        "authorizer.class.name": "allowlist",
        "allowlist.rules": "*@127.0.0.2:DESCRIBE_CONFIGS;*@127.0.0.3:ALTER_CONFIGS",
    }
    with Broker(config) as b:
        a = b.bootstrap_servers
        assert _describe(a, "")[:2] == (CLUSTER_AUTH, "Cluster authorization failed.")
        assert _incremental(a, "", [("max.connections", 0, "5")])[0] == CLUSTER_AUTH
        assert _describe(a, "", source="127.0.0.2")[0] == OK
        assert _incremental(a, "", [("max.connections", 0, "50")], source="127.0.0.2")[0] == CLUSTER_AUTH
        assert _incremental(a, "", [("max.connections", 0, "50")], source="127.0.0.3") == (OK, None)


def _accept_storm(address: str, attempts: int) -> float:
    """Open ``attempts`` connections at once; seconds until the broker accepted the last (answered)."""
    host, _, port = address.rpartition(":")
    frame = encode_request(18, 0, 1, "storm", {})
    done: list[float] = []
    start = time.monotonic()

    def one() -> None:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            assert sock.recv(4)
        done.append(time.monotonic() - start)

    threads = [threading.Thread(target=one) for _ in range(attempts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == attempts
    return max(done)


def test_raising_the_rate_over_the_wire_takes_effect_without_restart() -> None:
    config = {"quota.window.num": "2", "quota.window.size.seconds": "1", "max.connection.creation.rate": "4"}
    with Broker(config) as b:
        a = b.bootstrap_servers
        slow = _accept_storm(a, 16)  # 4/s: the acceptor waits, about 3 s for 16
        assert _incremental(a, "", [("max.connection.creation.rate", 0, "100000")]) == (OK, None)
        time.sleep(1.0)
        fast = _accept_storm(a, 16)
        print(
            f"16 connections at once: {slow:.2f}s at 4/s (static), {fast:.2f}s after raising it over the wire"
        )
        assert slow > 2.0 and fast < 1.0
        # and lowering it again (an override for this broker) slows it down again
        assert _incremental(a, str(b.broker_id), [("max.connection.creation.rate", 0, "4")]) == (OK, None)
        time.sleep(2.1)
        assert _accept_storm(a, 16) > 2.0


def test_dynamic_configs_on_zookeeper_across_brokers_and_restarts(zk_connect: str) -> None:
    config = {"zookeeper.connect": zk_connect}
    with Broker({**config, "broker.id": "1"}) as first, Broker({**config, "broker.id": "2"}) as second:
        assert _incremental(first.bootstrap_servers, "", [("max.connections", 0, "777")]) == (OK, None)
        assert _incremental(second.bootstrap_servers, "2", [("max.connections.per.ip", 0, "55")]) == (
            OK,
            None,
        )
        # Kafka's nodes and notifications
        assert first.store is not None
        zk = first.store.client  # type: ignore[attr-defined]
        import json

        assert json.loads(zk.get("/config/brokers/<default>")[0]) == {
            "version": 1,
            "config": {"max.connections": "777"},
        }
        assert json.loads(zk.get("/config/brokers/2")[0])["config"] == {"max.connections.per.ip": "55"}
        notes = [json.loads(zk.get(f"/config/changes/{n}")[0]) for n in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "brokers/<default>"} in notes
        # the other broker applies the default within a second, without a restart
        other = _quotas(second)
        wait_until(
            lambda: other.connection_quotas is not None and other.connection_quotas.max_connections == 777,
            timeout=1.0,
            what="the default on the other broker",
        )
        assert _quotas(first).connection_quotas.max_per_ip == 2147483647  # type: ignore[union-attr]
        assert other.connection_quotas.max_per_ip == 55  # type: ignore[union-attr]
    with Broker({**config, "broker.id": "2"}) as again:  # a restart keeps both levels
        quotas = _quotas(again).connection_quotas
        assert quotas is not None and (quotas.max_connections, quotas.max_per_ip) == (777, 55)
        _, _, described = _describe(
            again.bootstrap_servers, "2", ["max.connections", "max.connections.per.ip"]
        )
        assert described["max.connections"]["config_source"] == DYNAMIC_DEFAULT
        assert described["max.connections.per.ip"]["config_source"] == DYNAMIC_BROKER


def test_passwords_are_described_as_sensitive_without_their_value() -> None:
    with Broker({"broker.id": "4", "listener.name.plaintext.ssl.keystore.password": "s3cret"}) as b:
        _, _, described = _describe(
            b.bootstrap_servers, "4", ["listener.name.plaintext.ssl.keystore.password"]
        )
        entry = described["listener.name.plaintext.ssl.keystore.password"]
        assert (entry["value"], entry["is_sensitive"], entry["config_source"]) == (None, True, STATIC)
        assert all(s["value"] is None for s in entry["synonyms"])
