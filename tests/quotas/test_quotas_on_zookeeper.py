"""The quota rules against the ZooKeeper store on a real server, restarts included."""

from __future__ import annotations

import time

from quota_wire import alter, describe, ent, served

from kafkapy import Broker
from kafkapy.quotas import QuotasModule

RATE = "connection_creation_rate"


def _quotas(broker: Broker) -> QuotasModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, QuotasModule))


def test_quotas_on_zookeeper_across_brokers_and_restarts(zk_connect: str) -> None:
    config = {"zookeeper.connect": zk_connect, "quota.window.num": "2"}
    with Broker(config) as first, Broker(config) as second:
        a = first.bootstrap_servers
        assert alter(
            a,
            [
                ({"ip": "127.0.0.2"}, [(RATE, 3)]),
                ({"user": "alice"}, [("producer_byte_rate", 10)]),
                ({"ip": "10.1.1.1"}, [(RATE, 0)]),
            ],
        ) == [(0, None), (0, None), (42, "Configuration connection_creation_rate must be positive, not 0.0")]
        assert first.store is not None
        assert first.store.entity_config("ips/127.0.0.2") == {RATE: "3"}
        # the other broker applies it within a second, without a restart
        deadline = time.monotonic() + 1.0
        while (
            time.monotonic() < deadline
            and _quotas(second).connection_quotas.ip_rate_quota(  # type: ignore[union-attr]
                "127.0.0.2"
            )
            != 3.0
        ):
            time.sleep(0.02)
        assert _quotas(second).connection_quotas.ip_rate_quota("127.0.0.2") == 3.0  # type: ignore[union-attr]
        b = second.bootstrap_servers
        results = [served(b, "127.0.0.2", timeout=3) for _ in range(8)]
        assert 3 <= sum(results) < 8  # over the quota: some closed
        assert describe(b, [("ip", 0, "127.0.0.2")])[2] == {ent(ip="127.0.0.2"): {RATE: 3.0}}
        assert describe(b, [("ip", 2, None), ("user", 2, None)])[0] == 42
        # remove: the entity disappears from ZooKeeper
        assert alter(b, [({"user": "alice"}, [("producer_byte_rate", None)])]) == [(0, None)]
        assert first.store.entity_configs("users") == {}
    # a restarted broker keeps the quotas (they live in ZooKeeper)
    with Broker(config) as again:
        assert describe(again.bootstrap_servers, [])[2] == {ent(ip="127.0.0.2"): {RATE: 3.0}}
        assert _quotas(again).connection_quotas.ip_rate_quota("127.0.0.2") == 3.0  # type: ignore[union-attr]
