"""Feature versioning (KIP-584) on embedded brokers, through kafka-python's KafkaAdminClient
(describe_features / update_features) and raw requests where kafka-python cannot go (v0/v1,
unknown upgrade types, DeleteFeatures)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from feature_helpers import admin, advertised, api_versions, finalized, request, wait_until
from features_testmod import GATED_KEY, TEST_FEATURE, DefaultsModule, GatedModule
from kafka.errors import ClusterAuthorizationFailedError, InvalidUpdateVersionError

from kafkapy import Broker
from kafkapy.client import ClientError
from kafkapy.features import FEATURE_IP_QUOTA
from kafkapy.store import MemoryStore

UPDATE_FEATURES = 57
DELETE_FEATURES = 1020


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(modules=[GatedModule, DefaultsModule]) as b:
        yield b


def test_a_fresh_cluster_finalizes_every_feature_at_its_default(broker: Broker) -> None:
    with admin(broker.bootstrap_servers) as client:
        described = client.describe_features()
    assert described[TEST_FEATURE] == {"supported": (1, 3), "finalized": (3, 3), "finalized_epoch": 0}
    # A module's default_feature_levels wins over the maximum.
    assert described["test.defaulted"] == {"supported": (1, 5), "finalized": (2, 2), "finalized_epoch": 0}
    # kafka-python asks ApiVersions v4; v3 omits features supported from level 0 (KAFKA-17492).
    assert described["test.zero"] == {"supported": (0, 2), "finalized": (2, 2), "finalized_epoch": 0}
    assert described[FEATURE_IP_QUOTA]["finalized"] == (1, 1)
    v3 = api_versions(broker.bootstrap_servers, 3)
    assert "test.zero" not in [f["name"] for f in v3["supported_features"]]
    assert {"name": "test.zero", "max_version_level": 2, "min_version_level": 2} in v3["finalized_features"]
    assert broker.store is not None
    assert broker.store.finalized_features()[1][TEST_FEATURE] == 3


def test_finalize_on_start_false_leaves_them_empty_and_gates_closed() -> None:
    with Broker({"features.finalize.on.start": "false"}, modules=[GatedModule]) as b:
        body = api_versions(b.bootstrap_servers)
        assert body["finalized_features_epoch"] == -1 and body["finalized_features"] == []
        assert {"name": TEST_FEATURE, "min_version": 1, "max_version": 3} in body["supported_features"]
        with admin(b.bootstrap_servers) as client:
            described = client.describe_features()
            assert described[TEST_FEATURE] == {"supported": (1, 3)}
            assert GATED_KEY not in advertised(b.bootstrap_servers)
            assert client.update_features({TEST_FEATURE: 2}) == {TEST_FEATURE: "OK"}
            assert client.describe_features()[TEST_FEATURE]["finalized"] == (2, 2)
        assert GATED_KEY in advertised(b.bootstrap_servers)


def test_update_rules_through_kafka_python(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    with admin(bootstrap) as client:
        # A downgrade needs a downgrade type.
        with pytest.raises(InvalidUpdateVersionError, match=r"feature test\.gated.*Can't downgrade"):
            client.update_features({TEST_FEATURE: 2})
        assert client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 2)}) == {TEST_FEATURE: "OK"}
        assert finalized(bootstrap) == (1, {**finalized(bootstrap)[1], TEST_FEATURE: 2})
        # Setting the same level again succeeds (and changes nothing).
        assert client.update_features({TEST_FEATURE: 2}) == {TEST_FEATURE: "OK"}
        assert finalized(bootstrap)[0] == 1
        # Beyond the broker's maximum; an unknown feature.
        with pytest.raises(InvalidUpdateVersionError, match=r"test\.gated.*beyond broker \d+'s maximum 3"):
            client.update_features({TEST_FEATURE: 4})
        with pytest.raises(InvalidUpdateVersionError, match=r"feature no\.such.*unknown"):
            client.update_features({"no.such": 1})
        # validate_only (v1+) validates and changes nothing.
        assert client.update_features({TEST_FEATURE: 3}, validate_only=True) == {TEST_FEATURE: "OK"}
        with pytest.raises(InvalidUpdateVersionError):
            client.update_features({TEST_FEATURE: 4}, validate_only=True)
        assert finalized(bootstrap)[1][TEST_FEATURE] == 2
        # All or nothing: one invalid update and the valid one is not applied either.
        with pytest.raises(InvalidUpdateVersionError, match=r"no\.such"):
            client.update_features({TEST_FEATURE: 3, "no.such": 1})
        epoch, levels = finalized(bootstrap)
        assert epoch == 1 and levels[TEST_FEATURE] == 2
        assert client.update_features({TEST_FEATURE: 3, "test.defaulted": 5}) == {
            TEST_FEATURE: "OK", "test.defaulted": "OK"}
        # A level < 1 with a downgrade type deletes the feature; without one it is refused.
        with pytest.raises(InvalidUpdateVersionError, match="needs a downgrade type"):
            client.update_features({TEST_FEATURE: 0})
        assert client.update_features({TEST_FEATURE: ("UNSAFE_DOWNGRADE", 0)}) == {TEST_FEATURE: "OK"}
        described = client.describe_features()
        assert "finalized" not in described[TEST_FEATURE]
        assert described["test.defaulted"]["finalized"] == (5, 5)
        assert described["test.defaulted"]["finalized_epoch"] == 3


def test_update_features_v0_and_v1_on_the_wire(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    lower = {"feature": TEST_FEATURE, "max_version_level": 1}
    # v0: AllowDowngrade. A failure is told once, at the top level, with no per-feature results
    # (as Kafka's controller answers); a success lists each feature.
    refused = request(bootstrap, UPDATE_FEATURES, 0,
                      {"feature_updates": [{**lower, "allow_downgrade": False}]})
    assert refused["error_code"] == 95 and TEST_FEATURE in refused["error_message"]
    assert refused["results"] == []
    done = request(bootstrap, UPDATE_FEATURES, 0, {"feature_updates": [{**lower, "allow_downgrade": True}]})
    assert done["error_code"] == 0 and done["results"] == [
        {"feature": TEST_FEATURE, "error_code": 0, "error_message": None}]
    # v1: an unknown upgrade type; a downgrade UpgradeType lowers the level.
    unknown = request(bootstrap, UPDATE_FEATURES, 1, {"feature_updates": [
        {"feature": TEST_FEATURE, "max_version_level": 2, "upgrade_type": 7}]})
    assert unknown["error_code"] == 95 and "Unknown upgrade type 7" in unknown["error_message"]
    assert unknown["results"] == []
    # v2 has no per-feature results.
    v2 = request(bootstrap, UPDATE_FEATURES, 2, {"feature_updates": [
        {"feature": TEST_FEATURE, "max_version_level": 2, "upgrade_type": 1}]})
    assert v2 == {"throttle_time_ms": 0, "error_code": 0, "error_message": None}
    assert finalized(bootstrap)[1][TEST_FEATURE] == 2


def test_downgrade_types_cannot_raise_and_levels_cannot_be_negative(broker: Broker) -> None:
    """Kafka's controller (FeatureControlManager.updateFeature) refuses a downgrade type that
    raises a level and a negative level, and takes level 0 for a feature that is not finalized."""
    bootstrap = broker.bootstrap_servers
    with admin(bootstrap) as client:
        assert client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 2)}) == {TEST_FEATURE: "OK"}
        epoch = finalized(bootstrap)[0]
        for kind in ("SAFE_DOWNGRADE", "UNSAFE_DOWNGRADE"):
            with pytest.raises(InvalidUpdateVersionError, match=r"test\.gated.*can't raise the level"):
                client.update_features({TEST_FEATURE: (kind, 3)})
        with pytest.raises(InvalidUpdateVersionError, match=r"update version -1 .*can't be negative"):
            client.update_features({TEST_FEATURE: ("UNSAFE_DOWNGRADE", -1)})
        assert finalized(bootstrap) == (epoch, {**finalized(bootstrap)[1], TEST_FEATURE: 2})
        # v0's AllowDowngrade is a safe downgrade: it cannot raise a level either.
        raised = request(bootstrap, UPDATE_FEATURES, 0, {"feature_updates": [
            {"feature": TEST_FEATURE, "max_version_level": 3, "allow_downgrade": True}]})
        assert raised["error_code"] == 95 and raised["results"] == []
        assert finalized(bootstrap)[1][TEST_FEATURE] == 2
        # Deleted, then level 0 again, even as an upgrade: valid, and nothing changes.
        assert client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 0)}) == {TEST_FEATURE: "OK"}
        epoch = finalized(bootstrap)[0]
        assert client.update_features({TEST_FEATURE: 0}) == {TEST_FEATURE: "OK"}
        assert finalized(bootstrap)[0] == epoch and TEST_FEATURE not in finalized(bootstrap)[1]
        # A feature no broker knows is refused at level 0 too, as by Kafka's KRaft controller.
        for kind in ("UPGRADE", "SAFE_DOWNGRADE"):
            with pytest.raises(InvalidUpdateVersionError, match=r"version 0 for feature no\.such\..*unknown"):
                client.update_features({"no.such": (kind, 0)})
        assert finalized(bootstrap)[0] == epoch


def test_delete_features_is_all_or_nothing(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    epoch, before = finalized(bootstrap)
    failed = request(bootstrap, DELETE_FEATURES, 0, {"feature_names": [TEST_FEATURE, "no.such"]})
    assert failed["error_code"] == 95 and "no.such" in failed["error_message"]
    by_name = {r["feature"]: r for r in failed["results"]}
    assert by_name["no.such"]["error_code"] == 95 and "not finalized" in by_name["no.such"]["error_message"]
    assert finalized(bootstrap) == (epoch, before)  # nothing deleted
    done = request(bootstrap, DELETE_FEATURES, 0, {"feature_names": [TEST_FEATURE]})
    assert done["error_code"] == 0
    assert done["results"] == [{"feature": TEST_FEATURE, "error_code": 0, "error_message": None}]
    assert TEST_FEATURE not in finalized(bootstrap)[1]
    assert finalized(bootstrap)[0] == epoch + 1


def test_changing_features_needs_alter_on_the_cluster() -> None:
    with Broker({"authorizer.class.name": "features_testmod:DenyAlterCluster"}, modules=[GatedModule]) as b:
        with admin(b.bootstrap_servers) as client:
            with pytest.raises(ClusterAuthorizationFailedError):
                client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 1)})
            assert client.describe_features()[TEST_FEATURE]["finalized"] == (3, 3)  # reading is allowed
        v1 = request(b.bootstrap_servers, UPDATE_FEATURES, 1, {"feature_updates": [
            {"feature": TEST_FEATURE, "max_version_level": 1, "upgrade_type": 2}]})
        assert v1["error_code"] == 31 and v1["results"] == []
        deleted = request(b.bootstrap_servers, DELETE_FEATURES, 0, {"feature_names": [TEST_FEATURE]})
        assert deleted["error_code"] == 31
        assert finalized(b.bootstrap_servers)[1][TEST_FEATURE] == 3


def test_only_the_controller_changes_features_and_kafka_python_finds_it() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store, modules=[GatedModule]) as first, \
            Broker({"broker.id": 2}, store=store.peer(), modules=[GatedModule]) as second:
        assert first.runtime is not None and first.runtime.cluster.controller_id == 1
        update = {"feature_updates": [{"feature": TEST_FEATURE, "max_version_level": 2, "upgrade_type": 2}]}
        answer = request(second.bootstrap_servers, UPDATE_FEATURES, 1, update)
        assert answer["error_code"] == 41 and "controller is broker 1" in answer["error_message"]
        assert request(second.bootstrap_servers, DELETE_FEATURES, 0, {"feature_names": [TEST_FEATURE]}
                       )["error_code"] == 41
        # Metadata names the controller, so kafka-python bootstrapped on broker 2 routes there.
        with admin(second.bootstrap_servers) as client:
            assert client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 2)}) == {TEST_FEATURE: "OK"}
        # Every broker's cache follows through its watch.
        wait_until(lambda: finalized(second.bootstrap_servers)[1].get(TEST_FEATURE) == 2,
                   what="broker 2 to see the new level")
        assert finalized(first.bootstrap_servers) == finalized(second.bootstrap_servers)


def test_gating_an_api_on_a_feature(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    assert advertised(bootstrap)[GATED_KEY] == (0, 0)
    assert request(bootstrap, GATED_KEY, 0, {}) == {"error_code": 0, "topics": []}
    with admin(bootstrap) as client:
        # Below the level the API needs (2): gone from ApiVersions, and the empty response.
        client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 1)})
        assert GATED_KEY not in advertised(bootstrap)
        with pytest.raises(ClientError, match="does not serve"):
            request(bootstrap, GATED_KEY, 0, {})
        # Back at level 2: served again.
        client.update_features({TEST_FEATURE: 2})
        assert advertised(bootstrap)[GATED_KEY] == (0, 0)
        assert request(bootstrap, GATED_KEY, 0, {}) == {"error_code": 0, "topics": []}
        # Disabled (deleted): gone again; finalized again: back.
        client.update_features({TEST_FEATURE: ("UNSAFE_DOWNGRADE", 0)})
        assert GATED_KEY not in advertised(bootstrap)
        with pytest.raises(ClientError, match="does not serve"):
            request(bootstrap, GATED_KEY, 0, {})
        client.update_features({TEST_FEATURE: 3})
        assert GATED_KEY in advertised(bootstrap)
        assert request(bootstrap, GATED_KEY, 0, {}) == {"error_code": 0, "topics": []}


def test_a_change_written_to_the_store_reaches_the_gates(broker: Broker) -> None:
    """The watch path, not the controller's own: another writer's change closes the gate."""
    assert broker.store is not None
    epoch, levels = broker.store.finalized_features()
    broker.store.set_finalized_features({**levels, TEST_FEATURE: 1}, epoch)
    wait_until(lambda: GATED_KEY not in advertised(broker.bootstrap_servers), what="the gate to close")
    assert finalized(broker.bootstrap_servers) == (epoch + 1, {**levels, TEST_FEATURE: 1})
