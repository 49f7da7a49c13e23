"""Where a broker with log.dirs keeps its metadata, and an in-process cluster's one store.

The brokers of ``Broker(brokers=N)`` share one store; with log.dirs it is the durable one, in
``metadata.log.dir`` as given to the cluster (by default the first of its log.dirs, beside the
brokers' ``broker-<id>`` directories). Started again over the same dirs, the cluster has its topics
with their ids, its cluster id (the one every broker's meta.properties holds), and leader epochs
no lower than it left them: a leader moved before the stop bumped them, and they do not go back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkapy import Broker
from kafkapy.log.manager import read_meta_properties
from kafkapy.server.config import ConfigError

SETTINGS = {"auto.leader.rebalance.enable": False}  # leaders move only when the test moves them


def test_a_cluster_restarted_over_its_log_dirs_keeps_its_metadata(tmp_path: Path) -> None:
    config = {**SETTINGS, "log.dirs": str(tmp_path)}
    with Broker(config, brokers=2) as cluster:
        assert cluster.store is not None
        cluster.store.create_topic("orders", {0: (0, 1), 1: (1, 0)}, config={"retention.ms": "60000"})
        cluster.stop_broker(1)  # broker 1's leaderships move to broker 0, with new leader epochs
        cluster.start_broker(1)
        cluster_id = cluster.store.cluster_id()
        topics = cluster.store.topics()
        states = cluster.store.partition_states()
    assert states[("orders", 1)].leader == 0 and states[("orders", 1)].leader_epoch >= 1
    assert {p.name for p in tmp_path.iterdir()} >= {"broker-0", "broker-1", "kafkapy-metadata.journal",
                                                    "kafkapy-metadata.snapshot"}
    for broker in ("broker-0", "broker-1"):  # the brokers' own dirs hold logs, not metadata
        assert not list((tmp_path / broker).glob("kafkapy-metadata.*"))
        assert read_meta_properties(tmp_path / broker / "meta.properties")["cluster.id"] == cluster_id
    with Broker(config, brokers=2) as cluster:
        assert cluster.store is not None
        assert cluster.store.cluster_id() == cluster_id
        assert cluster.store.topics() == topics
        assert cluster.store.entity_config("topics/orders") == {"retention.ms": "60000"}
        again = cluster.store.partition_states()
        assert all(again[key].leader_epoch >= state.leader_epoch for key, state in states.items()), again


def test_log_dirs_of_another_cluster_are_refused(tmp_path: Path) -> None:
    """meta.properties and the store agree on the cluster id: metadata files lost (or another
    cluster's) beside log dirs that name a cluster are refused in one line, as Kafka refuses log
    dirs of another cluster, rather than serving the logs under topics made again."""
    with Broker({"log.dirs": str(tmp_path)}) as broker:
        assert broker.store is not None
        cluster_id = broker.store.cluster_id()
    assert read_meta_properties(tmp_path / "meta.properties")["cluster.id"] == cluster_id
    for name in ("kafkapy-metadata.journal", "kafkapy-metadata.snapshot"):
        (tmp_path / name).unlink()
    with pytest.raises(ConfigError) as refused:
        with Broker({"log.dirs": str(tmp_path)}):
            pass
    assert str(refused.value).startswith(f"log.dirs {tmp_path}: {tmp_path / 'meta.properties'} is cluster "
                                         f"{cluster_id}'s, not ")


def test_metadata_log_dir_places_the_metadata(tmp_path: Path) -> None:
    logs, metadata = tmp_path / "logs", tmp_path / "metadata"
    config = {"log.dirs": str(logs), "metadata.log.dir": str(metadata)}
    with Broker(config) as broker:
        assert broker.store is not None
        broker.store.create_topic("kept", {0: (broker.broker_id,)})
    assert sorted(p.name for p in metadata.iterdir()) == ["kafkapy-metadata.journal",
                                                           "kafkapy-metadata.snapshot"]
    assert not list(logs.glob("kafkapy-metadata.*"))
    with Broker(config) as broker:
        assert broker.store is not None and list(broker.store.topics()) == ["kept"]
