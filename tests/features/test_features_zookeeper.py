"""A rolling upgrade on a real ZooKeeper: two brokers, one of them older (supported.features.max),
and KIP-584's broker protections, in process and through `kafkapy serve`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from feature_helpers import admin, advertised, api_versions, finalized, request, wait_until
from features_testmod import GATED_KEY, TEST_FEATURE, GatedModule
from kafka.errors import InvalidUpdateVersionError
from kazoo.client import KazooClient

from kafkapy import Broker
from kafkapy.features import FeatureIncompatible
from kafkapy.store import ZooKeeperStore

HERE = Path(__file__).parent
LISTENING = re.compile(r"listening on PLAINTEXT://127\.0\.0\.1:(\d+)")


def _broker(zk_connect: str, broker_id: int, cap: int | None = None) -> Broker:
    config: dict[str, Any] = {"zookeeper.connect": zk_connect, "broker.id": broker_id}
    if cap is not None:
        config["supported.features.max"] = f"{TEST_FEATURE}:{cap}"
    return Broker(config, modules=[GatedModule])


def test_an_upgrade_beyond_an_older_broker_is_rejected(zk_connect: str) -> None:
    # The older broker starts first, so the fresh cluster is finalized at what it supports.
    with _broker(zk_connect, 2, cap=2) as old, _broker(zk_connect, 1) as new:
        with ZooKeeperStore(zk_connect) as store:
            assert store.finalized_features()[1][TEST_FEATURE] == 2
            assert {b.broker_id: b.features[TEST_FEATURE] for b in store.brokers()} == {1: (1, 3), 2: (1, 2)}
        with admin(new.bootstrap_servers) as client:
            # Each broker describes its own supported range (kafka-python asks any one of them).
            assert client.describe_features()[TEST_FEATURE]["supported"] in ((1, 2), (1, 3))
        for broker, high in ((new, 3), (old, 2)):
            supported = api_versions(broker.bootstrap_servers)["supported_features"]
            assert {"name": TEST_FEATURE, "min_version": 1, "max_version": high} in supported
        with admin(new.bootstrap_servers) as client:
            with pytest.raises(InvalidUpdateVersionError, match=r"beyond broker 2's maximum 2"):
                client.update_features({TEST_FEATURE: 3})
            assert client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 1)}) == {TEST_FEATURE: "OK"}
        for broker in (old, new):
            wait_until(lambda b=broker: finalized(b.bootstrap_servers)[1][TEST_FEATURE] == 1,
                       what="both brokers to see level 1")
            assert GATED_KEY not in advertised(broker.bootstrap_servers)
        # Whoever is not the controller says so, and names the one that is.
        controller = new.runtime.cluster.controller_id if new.runtime else -1
        other = old if controller == 1 else new
        answer = request(other.bootstrap_servers, 57, 1, {"feature_updates": [
            {"feature": TEST_FEATURE, "max_version_level": 2, "upgrade_type": 1}]})
        assert answer["error_code"] == 41
        # The older broker leaves (the upgrade of the rolling upgrade): now level 3 is valid.
        old.close()
        # Both must settle: the broker list and the controller election (which moves separately).
        wait_until(lambda: new.runtime is not None and len(new.runtime.cluster.brokers) == 1
                   and new.runtime.cluster.controller_id == 1,
                   what="broker 2 to leave and broker 1 to be controller")
        with admin(new.bootstrap_servers) as client:
            assert client.update_features({TEST_FEATURE: 3}) == {TEST_FEATURE: "OK"}
        assert finalized(new.bootstrap_servers)[1][TEST_FEATURE] == 3
        assert advertised(new.bootstrap_servers)[GATED_KEY] == (0, 0)
        # Broker protection at start: an old broker cannot join a cluster finalized beyond it.
        with pytest.raises(FeatureIncompatible, match=r"refuses to start: feature test\.gated is finalized "
                                                      r"at level 3, outside the levels 1\.\.2"):
            _broker(zk_connect, 2, cap=2).__enter__()
        with ZooKeeperStore(zk_connect) as store:
            assert [b.broker_id for b in store.brokers()] == [1]  # it did not stay registered


def test_a_running_broker_shuts_down_on_an_incompatible_finalized_change(zk_connect: str) -> None:
    with _broker(zk_connect, 2, cap=2) as old, _broker(zk_connect, 1) as new:
        assert old.runtime is not None and new.runtime is not None
        # A change that bypasses the controller's validation (written straight to /feature).
        with ZooKeeperStore(zk_connect) as store:
            epoch, levels = store.finalized_features()
            store.set_finalized_features({**levels, TEST_FEATURE: 3}, epoch)
        wait_until(lambda: old.runtime is not None and old.runtime.failed.is_set(), what="broker 2 to stop")
        assert "feature test.gated is finalized at level 3" in (old.runtime.failure or "")
        runtime = new.runtime
        wait_until(lambda: [b.broker_id for b in runtime.cluster.brokers] == [1],
                   what="broker 2 to leave the cluster")
        # The compatible broker carries on.
        assert finalized(new.bootstrap_servers)[1][TEST_FEATURE] == 3
        assert new.runtime.failure is None


def test_a_deleted_feature_znode_clears_the_finalized_features(zk_connect: str) -> None:
    """As Kafka's FinalizedFeatureChangeListener: /feature gone means nothing finalized (epoch -1),
    and a /feature created again (its epoch back at 0) is taken, not ignored as older."""
    with _broker(zk_connect, 1) as broker:
        bootstrap = broker.bootstrap_servers
        with admin(bootstrap) as client:
            assert client.update_features({TEST_FEATURE: ("SAFE_DOWNGRADE", 2)}) == {TEST_FEATURE: "OK"}
        epoch, levels = finalized(bootstrap)
        assert epoch == 1 and levels[TEST_FEATURE] == 2
        raw = KazooClient(hosts=zk_connect)
        raw.start()
        try:
            raw.delete("/feature")
        finally:
            raw.stop()
            raw.close()
        wait_until(lambda: finalized(bootstrap) == (-1, {}), what="the broker to forget the features")
        assert GATED_KEY not in advertised(bootstrap)
        with ZooKeeperStore(zk_connect) as store:
            assert store.set_finalized_features({TEST_FEATURE: 3}, -1) == 0
        wait_until(lambda: finalized(bootstrap) == (0, {TEST_FEATURE: 3}), what="the recreated features")
        assert advertised(bootstrap)[GATED_KEY] == (0, 0)


def _serve(zk_connect: str, broker_id: int, *overrides: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "kafkapy.cli", "serve", "--override", f"broker.id={broker_id}",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", f"zookeeper.connect={zk_connect}",
            "--override", "kafkapy.modules=features_testmod:GatedModule"]
    for item in overrides:
        args += ["--override", item]
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen(args, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path})


def _wait_listening(proc: subprocess.Popen[str]) -> int:
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        match = LISTENING.search(line)
        if match:
            return int(match.group(1))
        assert line or proc.poll() is None, f"kafkapy serve exited: {proc.returncode}"
    raise AssertionError("kafkapy serve did not start listening")


def test_kafkapy_serve_refuses_to_start_and_exits_on_an_incompatible_change(zk_connect: str) -> None:
    with ZooKeeperStore(zk_connect) as store:
        store.set_finalized_features({TEST_FEATURE: 3}, -1)
        refused = _serve(zk_connect, 2, f"supported.features.max={TEST_FEATURE}:2")
        _, err = refused.communicate(timeout=60)
        assert refused.returncode == 2
        assert "kafkapy serve: error: broker 2 refuses to start: feature test.gated is finalized at level 3" \
            in err
        epoch, _ = store.finalized_features()
        store.set_finalized_features({TEST_FEATURE: 2}, epoch)
        proc = _serve(zk_connect, 2, f"supported.features.max={TEST_FEATURE}:2")
        try:
            _wait_listening(proc)
            store.set_finalized_features({TEST_FEATURE: 3}, epoch + 1)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)  # and its stderr pipe closed
        assert proc.returncode == 2
        assert "broker 2 shut down: incompatible finalized features at epoch" in err
        assert [b.broker_id for b in store.brokers()] == []
