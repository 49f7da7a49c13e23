"""`kafkapy features`, the kafka-features.sh of kafkapy, and the pure rules behind it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from feature_helpers import finalized
from features_testmod import TEST_FEATURE, GatedModule

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.features.rules import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    FeatureUpdate,
    incompatibilities,
    plan_deletes,
    plan_updates,
)
from kafkapy.store import BrokerRegistration


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(modules=[GatedModule]) as b:
        yield b


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_describe_upgrade_downgrade_disable_delete(broker: Broker,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bs = ("features", "--bootstrap-server", broker.bootstrap_servers)
    code, out, _ = _run(capsys, *bs, "describe")
    assert code == 0
    assert (f"Feature: {TEST_FEATURE}\tSupportedMinVersion: 1\tSupportedMaxVersion: 3\t"
            f"FinalizedVersionLevel: 3\tEpoch: 0") in out.splitlines()
    code, out, err = _run(capsys, *bs, "downgrade", "--feature", TEST_FEATURE, "--version", "1", "--dry-run")
    assert (code, out) == (0, f"{TEST_FEATURE} can be downgraded to 1.\n")
    assert finalized(broker.bootstrap_servers)[1][TEST_FEATURE] == 3
    code, out, err = _run(capsys, *bs, "downgrade", "--feature", TEST_FEATURE, "--version", "1")
    assert (code, out) == (0, f"{TEST_FEATURE} was downgraded to 1.\n")
    code, out, err = _run(capsys, *bs, "upgrade", "--feature", TEST_FEATURE, "--version", "4")
    assert code == 1 and f"Could not upgrade {TEST_FEATURE}. INVALID_UPDATE_VERSION:" in err
    assert "maximum 3" in err
    code, out, err = _run(capsys, *bs, "upgrade", "--feature", f"{TEST_FEATURE}=2")
    assert (code, out) == (0, f"{TEST_FEATURE} was upgraded to 2.\n")
    code, out, err = _run(capsys, *bs, "disable", "--feature", TEST_FEATURE, "--unsafe")
    assert (code, out) == (0, f"{TEST_FEATURE} was disabled.\n")
    assert TEST_FEATURE not in finalized(broker.bootstrap_servers)[1]
    code, out, err = _run(capsys, *bs, "delete", "--feature", TEST_FEATURE)
    assert code == 1 and "not finalized" in err
    code, out, err = _run(capsys, *bs, "upgrade", "--feature", TEST_FEATURE, "--version", "3")
    assert code == 0
    code, out, err = _run(capsys, *bs, "delete", "--feature", TEST_FEATURE)
    assert (code, out) == (0, f"{TEST_FEATURE} was deleted.\n")
    code, out, _ = _run(capsys, *bs, "describe")
    assert f"Feature: {TEST_FEATURE}\tSupportedMinVersion: 1\tSupportedMaxVersion: 3\t" \
           f"FinalizedVersionLevel: -\tEpoch: 5" in out.splitlines()


def test_cli_reports_an_unreachable_broker(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "features", "--bootstrap-server", "127.0.0.1:1", "describe")
    assert code == 1 and err.startswith("kafkapy features: cannot connect to 127.0.0.1:1")


BROKERS = [BrokerRegistration(1, (), None, {"a": (1, 3), "b": (1, 1)}),
           BrokerRegistration(2, (), None, {"a": (1, 2), "b": (1, 1)})]


def test_rules() -> None:
    levels = {"a": 2, "b": 1}
    assert plan_updates(levels, BROKERS, [FeatureUpdate("a", 2)]) == (levels, {})
    assert plan_updates(levels, BROKERS, [FeatureUpdate("a", 1, SAFE_DOWNGRADE)]) == ({"a": 1, "b": 1}, {})
    assert plan_updates(levels, BROKERS, [FeatureUpdate("b", 0, UNSAFE_DOWNGRADE)]) == ({"a": 2}, {})
    _, errors = plan_updates(levels, BROKERS, [FeatureUpdate("a", 3), FeatureUpdate("c", 1),
                                               FeatureUpdate("b", 0), FeatureUpdate("a", 1, 9)])
    assert "beyond broker 2's maximum 2" in errors["a"]
    assert "unknown" in errors["c"] and "downgrade type" in errors["b"]
    _, errors = plan_updates(levels, BROKERS, [FeatureUpdate("a", 1, 9)])
    assert "Unknown upgrade type 9" in errors["a"]
    assert plan_deletes(levels, ["a"]) == ({"b": 1}, {})
    assert "not finalized" in plan_deletes(levels, ["a", "z"])[1]["z"]
    assert incompatibilities({"a": (1, 2)}, {"a": 2}) == []
    assert incompatibilities({"a": (1, 2)}, {"a": 3, "q": 1}) == [
        "feature a is finalized at level 3, outside the levels 1..2 this broker supports",
        "feature q is finalized at level 1, which this broker does not support at all"]
