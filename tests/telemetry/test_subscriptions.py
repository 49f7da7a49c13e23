"""Client-metrics subscriptions: Kafka's checks of their configs, which clients they match, and
what a matched client is asked for."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.telemetry.subscriptions import (
    DEFAULT_INTERVAL_MS,
    ClientAttributes,
    SubscriptionError,
    effective_subscription,
    parse_subscription,
)

CLIENT = ClientAttributes(uuid.UUID(int=42), "orders-app", "127.0.0.1", 50123)


@pytest.mark.parametrize(("config", "message"), [
    ({"interval.ms": "99"}, "interval must be between 100 and 3600000"),
    ({"interval.ms": "3600001"}, "interval must be between 100 and 3600000"),
    ({"interval.ms": "soon"}, "Not a number of type INT"),
    ({"interval.ms": "1_000"}, "Not a number of type INT"),  # Python's int() reads it, Java's not
    ({"interval.ms": "4294967296"}, "Not a number of type INT"),  # past Java's int
    ({"metric": "x"}, "Unknown client metrics configuration: metric"),
    ({"match": "client_id"}, "Illegal client matching pattern: client_id"),
    ({"match": "host=a"}, "Illegal client matching pattern: host=a"),
    ({"match": "client_id=a=b"}, "Illegal client matching pattern: client_id=a=b"),
    # Java's split drops trailing empty parts: no pattern after the "="
    ({"match": "client_id="}, "Illegal client matching pattern: client_id=$"),
    # ConfigDef keeps the empty item after a trailing comma, and it is no pattern
    ({"match": "client_id=x,"}, "Illegal client matching pattern: $"),
    ({"match": "client_id=("}, "Illegal client matching pattern: client_id=("),
    # re.compile raised OverflowError for this one: the IncrementalAlterConfigs handler failed
    ({"match": "client_id=a{4294967296}"}, "Illegal client matching pattern: client_id=a"),
    # valid for Java, but only a backtracking engine runs them: the broker refuses (patterns.py)
    ({"match": "client_id=(?=x)x"}, "Illegal client matching pattern: client_id="),
    ({"match": "client_id=(a)\\1"}, "Illegal client matching pattern: client_id="),
])
def test_configs_kafka_refuses(config: dict[str, str], message: str) -> None:
    with pytest.raises(SubscriptionError, match=message.replace("(", r"\(")):
        parse_subscription("s", config)


def test_values_read_as_kafkas_configdef_reads_them() -> None:
    subscription = parse_subscription("s", {"metrics": " a. ,, b. ", "interval.ms": " +1000 ",
                                            "match": "client_id=orders-app=="})
    # Empty items are kept (an empty prefix is every metric to a client), whitespace around
    # commas is not; trailing "=" are dropped by Java's split.
    assert subscription.metrics == ("a.", "", "b.")
    assert subscription.interval_ms == 1000
    assert subscription.matches(CLIENT)
    assert effective_subscription([subscription], CLIENT)[0] == ("", "a.", "b.")
    # Java's \s is ASCII whitespace: a no-break space stays in the item.
    assert parse_subscription("s", {"metrics": "a.,\u00a0b."}).metrics == ("a.", "\u00a0b.")


def test_a_later_pattern_for_an_attribute_replaces_an_earlier_one() -> None:
    """Kafka keeps one pattern per attribute (a map): the last one given is the one matched."""
    assert parse_subscription("s", {"match": "client_id=billing,client_id=orders-.*"}).matches(CLIENT)
    assert not parse_subscription("s", {"match": "client_id=orders-.*,client_id=billing"}).matches(CLIENT)


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(SubscriptionError, match="Subscription name can't be empty"):
        parse_subscription("", {"metrics": "*"})


def test_defaults() -> None:
    subscription = parse_subscription("s", {})
    assert subscription.metrics == subscription.match == ()
    assert subscription.interval_ms == DEFAULT_INTERVAL_MS
    assert subscription.matches(CLIENT)  # no pattern matches every client


def test_every_pattern_must_match_the_whole_value() -> None:
    def matches(match: str) -> bool:
        return parse_subscription("s", {"match": match}).matches(CLIENT)

    assert matches("client_id=orders-.*")
    assert matches("client_id=orders-app, client_source_address=127\\.0\\.0\\.1")
    assert not matches("client_id=orders")  # a prefix is not a match: the whole value must match
    assert not matches("client_id=orders-app,client_source_port=1")
    assert matches("client_source_port=50[0-9]+")
    # The instance id as Kafka's Uuid prints it (URL-safe base64), not Python's hex form.
    assert matches("client_instance_id=AAAAAAAAAAAAAAAAAAAAKg")
    assert not matches(f"client_instance_id={uuid.UUID(int=42)}")
    assert not parse_subscription("s", {"match": "client_id=.*"}).matches(
        ClientAttributes(uuid.UUID(int=1), None, "::1", 1))  # no client id: nothing matches it


def test_a_client_gets_the_union_of_what_it_matches_and_the_shortest_interval() -> None:
    mine = parse_subscription("mine", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
                                       "match": "client_id=orders-app"})
    everyone = parse_subscription("everyone", {"metrics": "org.apache.kafka.consumer.",
                                               "interval.ms": "5000"})
    others = parse_subscription("others", {"metrics": "*", "interval.ms": "100",
                                           "match": "client_id=billing"})
    metrics, interval_ms, _ = effective_subscription([mine, everyone, others], CLIENT)
    assert (metrics, interval_ms) == (("org.apache.kafka.consumer.", "org.apache.kafka.producer."), 1000)
    all_of_them = parse_subscription("all", {"metrics": "*,org.apache.kafka.producer."})
    assert effective_subscription([mine, all_of_them], CLIENT)[:2] == (("*",), 1000)
    assert effective_subscription([others], CLIENT)[:2] == ((), DEFAULT_INTERVAL_MS)


def test_the_subscription_id_changes_with_the_subscriptions_and_the_client() -> None:
    one = parse_subscription("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    two = parse_subscription("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000"})
    first = effective_subscription([one], CLIENT)[2]
    assert effective_subscription([one], CLIENT)[2] == first  # stable
    assert effective_subscription([two], CLIENT)[2] != first
    other = ClientAttributes(uuid.UUID(int=43), "orders-app", "127.0.0.1", 50123)
    assert effective_subscription([one], other)[2] != first
    assert -2**31 <= first < 2**31
