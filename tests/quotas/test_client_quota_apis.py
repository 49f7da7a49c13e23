"""DescribeClientQuotas and AlterClientQuotas over the wire, with kafka-python's protocol classes."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from quota_wire import alter, describe, ent

from kafkapy import Broker

OK, UNSUPPORTED, CLUSTER_AUTH, INVALID = 0, 35, 31, 42
RATE = "connection_creation_rate"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


@pytest.mark.parametrize("version", [0, 1])
def test_alter_then_describe_every_entity_kind(broker: Broker, version: int) -> None:
    a = broker.bootstrap_servers
    assert (
        alter(
            a,
            [
                ({"ip": "1.2.3.4"}, [(RATE, 100)]),
                ({"ip": None}, [(RATE, 5)]),
                ({"user": "alice"}, [("producer_byte_rate", 1024), ("request_percentage", 12.5)]),
                ({"client-id": None}, [("consumer_byte_rate", 2048)]),
                ({"user": "alice", "client-id": "c1"}, [("controller_mutation_rate", 0.5)]),
            ],
            version=version,
        )
        == [(OK, None)] * 5
    )
    code, _, found = describe(a, [], version=version)
    assert code == OK and found == {
        ent(ip="1.2.3.4"): {RATE: 100.0},
        ent(ip=None): {RATE: 5.0},
        ent(user="alice"): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        ent(client_id=None): {"consumer_byte_rate": 2048.0},
        ent(user="alice", client_id="c1"): {"controller_mutation_rate": 0.5},
    }
    # match types: exact, default, any (any includes the default)
    assert describe(a, [("ip", 0, "1.2.3.4")])[2] == {ent(ip="1.2.3.4"): {RATE: 100.0}}
    assert describe(a, [("ip", 1, None)])[2] == {ent(ip=None): {RATE: 5.0}}
    assert set(describe(a, [("ip", 2, None)])[2]) == {ent(ip="1.2.3.4"), ent(ip=None)}
    # strict: only entities made of exactly the filtered types
    assert set(describe(a, [("user", 2, None)])[2]) == {ent(user="alice"), ent(user="alice", client_id="c1")}
    assert set(describe(a, [("user", 2, None)], strict=True)[2]) == {ent(user="alice")}
    assert set(describe(a, [("user", 0, "alice"), ("client-id", 0, "c1")], strict=True)[2]) == {
        ent(user="alice", client_id="c1")
    }
    assert describe(a, [], strict=True)[2] == {}


def test_alter_validation_answers_per_entry(broker: Broker) -> None:
    a = broker.bootstrap_servers
    results = alter(
        a,
        [
            ({"ip": "10.0.0.1"}, [("unknown_key", 1)]),
            ({}, [(RATE, 1)]),
            ({"bogus": "x"}, [(RATE, 1)]),
            ({"user": ""}, [("producer_byte_rate", 1)]),
            ({"ip": "10.0.0.1", "user": "bob"}, [(RATE, 1)]),
            ({"ip": "no-such-host.invalid"}, [(RATE, 1)]),
            ({"ip": "10.0.0.1"}, [(RATE, 0)]),
            ({"ip": "10.0.0.1"}, [(RATE, -3)]),
            ({"ip": "10.0.0.1"}, [(RATE, 2.5)]),
            ({"user": "bob"}, [("producer_byte_rate", 1.5)]),
            ({"ip": "10.0.0.1"}, [("producer_byte_rate", 10)]),  # a user/client key on an ip
            ({"user": "bob"}, [(RATE, 10)]),  # an ip key on a user
            ({"ip": "10.0.0.2"}, [(RATE, 7)]),  # valid, among the invalid ones
            ({"ip": "localhost"}, [(RATE, 8)]),  # a resolvable host is accepted
            ({"ip": "::1"}, [(RATE, 9)]),
        ],
    )
    codes = [c for c, _ in results]
    assert codes == [INVALID] * 12 + [OK, OK, OK]
    assert all(m for c, m in results if c == INVALID)
    assert "Invalid configuration key unknown_key" in results[0][1]
    assert "empty" in results[1][1] and "bogus" in results[2][1] and "combined" in results[4][1]
    assert "not a valid IP or resolvable host" in results[5][1]
    assert set(describe(a, [("ip", 2, None)])[2]) == {ent(ip="10.0.0.2"), ent(ip="localhost"), ent(ip="::1")}


def test_validate_only_remove_and_empty_entity_disappears(broker: Broker) -> None:
    a = broker.bootstrap_servers
    assert alter(a, [({"ip": "1.1.1.1"}, [(RATE, 3)])], validate_only=True) == [(OK, None)]
    assert alter(a, [({"ip": "1.1.1.1"}, [(RATE, 0)])], validate_only=True)[0][0] == INVALID
    assert describe(a, [])[2] == {}
    assert alter(a, [({"user": "u"}, [("producer_byte_rate", 10), ("consumer_byte_rate", 20)])]) == [
        (OK, None)
    ]
    assert alter(a, [({"user": "u"}, [("producer_byte_rate", None), ("no_such_key", None)])]) == [(OK, None)]
    assert describe(a, [])[2] == {ent(user="u"): {"consumer_byte_rate": 20.0}}
    assert alter(a, [({"user": "u"}, [("consumer_byte_rate", None)])]) == [(OK, None)]
    assert describe(a, [])[2] == {}
    assert broker.store is not None and broker.store.entity_configs("users") == {}


def test_describe_filter_errors(broker: Broker) -> None:
    a = broker.bootstrap_servers
    assert describe(a, [("ip", 2, None), ("user", 2, None)])[0] == INVALID
    assert describe(a, [("ip", 2, None), ("client-id", 0, "c")])[0] == INVALID
    assert describe(a, [("", 2, None)])[0] == INVALID
    assert describe(a, [("user", 2, None), ("user", 0, "x")])[0] == INVALID
    code, message, _ = describe(a, [("topic", 2, None)])
    assert code == UNSUPPORTED and "topic" in (message or "")


def test_names_are_sanitized_in_the_store(broker: Broker) -> None:
    a = broker.bootstrap_servers
    assert alter(a, [({"user": "CN=alice,O=Acme"}, [("producer_byte_rate", 5)])]) == [(OK, None)]
    assert broker.store is not None
    assert list(broker.store.entity_configs("users")) == ["users/CN%3Dalice%2CO%3DAcme"]
    assert describe(a, [("user", 0, "CN=alice,O=Acme")])[2] == {
        ent(user="CN=alice,O=Acme"): {"producer_byte_rate": 5.0}
    }


def test_ip_entity_is_gated_by_the_feature() -> None:
    with Broker() as b:
        assert b.runtime is not None
        b.runtime.finalized_features = {}  # kafkapy.ip_quota not finalized
        a = b.bootstrap_servers
        assert alter(a, [({"ip": "1.2.3.4"}, [(RATE, 1)])])[0][0] == INVALID
        assert alter(a, [({"user": "x"}, [("producer_byte_rate", 1)])]) == [(OK, None)]
        assert describe(a, [("ip", 2, None)])[0] == UNSUPPORTED
        b.runtime.finalized_features = {"kafkapy.ip_quota": 1}
        assert alter(a, [({"ip": "1.2.3.4"}, [(RATE, 1)])]) == [(OK, None)]


def test_authorization_with_the_allowlist_authorizer() -> None:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "authorizer.class.name": "allowlist",
        "super.users": "User:admin;User:root",
        "allowlist.rules": "User:ANONYMOUS@127.0.0.2:DESCRIBE_CONFIGS;*@127.0.0.3/32:ALTER_CONFIGS",
    }
    with Broker(config) as b:
        a = b.bootstrap_servers
        # 127.0.0.1: nothing granted
        assert describe(a, [])[0] == CLUSTER_AUTH
        assert (
            alter(a, [({"ip": "1.2.3.4"}, [(RATE, 1)]), ({"user": "u"}, [("producer_byte_rate", 1)])])
            == [(CLUSTER_AUTH, "Cluster authorization failed.")] * 2
        )
        # 127.0.0.2: describe only
        assert describe(a, [], source="127.0.0.2")[0] == OK
        assert alter(a, [({"ip": "1.2.3.4"}, [(RATE, 1)])], source="127.0.0.2")[0][0] == CLUSTER_AUTH
        # 127.0.0.3: alter (which implies describe)
        assert alter(a, [({"ip": "1.2.3.4"}, [(RATE, 1)])], source="127.0.0.3") == [(OK, None)]
        assert describe(a, [], source="127.0.0.3")[2] == {ent(ip="1.2.3.4"): {RATE: 1.0}}
        assert b.runtime is not None
        authorizer = b.runtime.authorizer
        assert authorizer.authorize("User:admin", "10.9.9.9", "ALTER_CONFIGS", "CLUSTER", "kafka-cluster")
        assert not authorizer.authorize(
            "User:bob", "10.9.9.9", "DESCRIBE_CONFIGS", "CLUSTER", "kafka-cluster"
        )


def test_a_change_reaches_every_broker_in_the_cluster() -> None:
    with Broker() as first:
        with Broker(store=first.store) as second:
            assert alter(first.bootstrap_servers, [({"ip": "127.0.0.9"}, [(RATE, 42)])]) == [(OK, None)]
            for b in (first, second):
                assert b.runtime is not None
                module = next(m for m in b.runtime.modules if m.name == "quotas")
                import time

                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline:
                    quotas = module.connection_quotas  # type: ignore[attr-defined]
                    if quotas.ip_rate_quota("127.0.0.9") == 42.0:
                        break
                    time.sleep(0.02)
                assert quotas.ip_rate_quota("127.0.0.9") == 42.0


NAN, INF = math.nan, math.inf


def test_nan_is_accepted_for_every_key_as_kraft_does(broker: Broker) -> None:
    """KRaft's ClientQuotaControlManager checks a value with comparisons (<= 0, past the type's
    maximum, a fractional remainder) that NaN never meets: it is stored, for any key, and described
    back. Infinity is a DOUBLE like any other, too large for an integer key, and not above 0 when
    negative."""
    a = broker.bootstrap_servers
    results = alter(a, [
        ({"user": "alice"}, [("producer_byte_rate", NAN), ("consumer_byte_rate", NAN),
                             ("request_percentage", NAN), ("controller_mutation_rate", NAN)]),
        ({"ip": "10.0.0.3"}, [(RATE, NAN)]),
        ({"user": "bob"}, [("request_percentage", INF)]),
        ({"user": "carol"}, [("producer_byte_rate", INF)]),
        ({"ip": "10.0.0.4"}, [(RATE, INF)]),
        ({"user": "dave"}, [("request_percentage", -INF)]),
    ])
    assert [code for code, _ in results] == [OK, OK, OK, INVALID, INVALID, INVALID]
    assert "LONG" in str(results[3][1]) and "INT" in str(results[4][1])
    _, _, found = describe(a, [])
    assert set(found) == {ent(user="alice"), ent(ip="10.0.0.3"), ent(user="bob")}
    alice = found[ent(user="alice")]
    assert len(alice) == 4 and all(math.isnan(v) for v in alice.values())
    assert math.isnan(found[ent(ip="10.0.0.3")][RATE])
    assert found[ent(user="bob")] == {"request_percentage": INF}
    # Stored as Java's Double.toString spells them, which Kafka's tools read back.
    assert broker.store is not None
    assert broker.store.entity_config("users/alice")["producer_byte_rate"] == "NaN"
    assert broker.store.entity_config("users/bob")["request_percentage"] == "Infinity"


def test_a_key_named_twice_in_one_entry_changes_nothing(broker: Broker) -> None:
    """KRaft's ClientQuotaControlManager: a duplicate key in one entry's ops is INVALID_REQUEST and
    that entity is left as it was (the other entries are applied)."""
    a = broker.bootstrap_servers
    assert alter(a, [({"user": "u"}, [("producer_byte_rate", 10)])]) == [(OK, None)]
    results = alter(a, [({"user": "u"}, [("producer_byte_rate", 20), ("producer_byte_rate", 30)]),
                        ({"client-id": "c"}, [("consumer_byte_rate", 5), ("consumer_byte_rate", None)]),
                        ({"user": "v"}, [("producer_byte_rate", 7)])])
    assert [c for c, _ in results] == [INVALID, INVALID, OK]
    assert "Duplicate quota key producer_byte_rate" in (results[0][1] or "")
    assert describe(a, [])[2] == {ent(user="u"): {"producer_byte_rate": 10.0},
                                  ent(user="v"): {"producer_byte_rate": 7.0}}


def test_a_nearly_whole_value_below_the_integer_is_fractional(broker: Broker) -> None:
    """Kafka's getErrorForIntegralQuotaValue takes value % 1.0: 2.9999999 leaves 0.9999999, a
    fraction; 3.0000001 leaves 1e-7, within its 1e-6."""
    a = broker.bootstrap_servers
    assert alter(a, [({"user": "u"}, [("producer_byte_rate", 2.9999999)])])[0][0] == INVALID
    assert alter(a, [({"user": "u"}, [("producer_byte_rate", 3.0000001)])]) == [(OK, None)]


def test_a_match_string_with_the_default_or_any_match_type_is_refused(broker: Broker) -> None:
    """ClientQuotasImage.describe: MATCH_TYPE_DEFAULT and MATCH_TYPE_SPECIFIED take no match
    string; one given is INVALID_REQUEST, not ignored."""
    a = broker.bootstrap_servers
    assert alter(a, [({"user": "alice"}, [("producer_byte_rate", 10)])]) == [(OK, None)]
    assert describe(a, [("user", 1, "alice")])[0] == INVALID
    assert describe(a, [("user", 2, "alice")])[0] == INVALID
    assert describe(a, [("user", 2, None)])[2] == {ent(user="alice"): {"producer_byte_rate": 10.0}}
