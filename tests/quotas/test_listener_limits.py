"""A listener's connection limits as Kafka sets them: its own ``listener.name.<l>.`` value, else the
broker-wide value (Kafka configures each ListenerConnectionQuota from the broker config with the
listener prefix overriding). The inter-broker listener is exempt from the broker-wide sensor and
count, not from those inherited listener limits; and a dynamic update may not bring a listener's
limit below 1 (ListenerConnectionQuota.validateReconfiguration).
"""

from __future__ import annotations

import asyncio

import pytest

from kafkapy import Broker, VirtualClock
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.quotas.connections import ConnectionQuotas
from kafkapy.quotas.metrics import MetricsRegistry
from kafkapy.server.config import BrokerConfig, ConfigError

CLIENT, INTERNAL = "CLIENT", "INTERNAL"
CLOCK = VirtualClock()  # one loop at a time runs on it
BROKER_RESOURCE, SET = 4, 0


def _quotas(loop: asyncio.AbstractEventLoop, settings: dict[str, object]) -> ConnectionQuotas:
    values = dict(BrokerConfig.build({"quota.window.num": 2, "quota.window.size.seconds": 1,
                                      **settings}).values)
    return ConnectionQuotas(values, [CLIENT, INTERNAL], INTERNAL, MetricsRegistry(loop.time), clock=loop.time)


async def _accepted_within(quotas: ConnectionQuotas, listener: str, seconds: float) -> bool:
    """Whether an accept on ``listener`` gets through within ``seconds`` of virtual time."""
    task = asyncio.ensure_future(quotas.acceptor_wait(listener))
    await asyncio.sleep(0)
    if seconds:
        await CLOCK.advance_async(seconds)
    done = task.done()
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return done


@pytest.mark.parametrize("override, throttled", [(None, True), ("1000", False)])
def test_the_inter_broker_listener_has_the_broker_wide_creation_rate_as_its_own(override: str | None,
                                                                                throttled: bool) -> None:
    settings: dict[str, object] = {"max.connection.creation.rate": 2}
    if override is not None:
        settings["listener.name.internal.max.connection.creation.rate"] = override

    async def main() -> None:
        quotas = _quotas(asyncio.get_running_loop(), settings)
        for _ in range(2):  # within the quota (a young sensor's padded window: 1 s)
            assert await _accepted_within(quotas, INTERNAL, 0.0)
        assert await _accepted_within(quotas, INTERNAL, 0.1) is not throttled
        assert quotas.broker_rate.measure(asyncio.get_running_loop().time()) == 0.0  # exempt from it

    CLOCK.run(main())


def test_the_inter_broker_listener_has_max_connections_as_its_own_count_limit() -> None:
    evicted: list[int] = []

    async def main() -> None:
        quotas = _quotas(asyncio.get_running_loop(), {"max.connections": 2})
        quotas.evict = evicted.append
        for _ in range(2):
            assert await _accepted_within(quotas, CLIENT, 0.0)
        assert not await _accepted_within(quotas, CLIENT, 0.1)  # the broker is at max.connections
        for _ in range(2):  # the inter-broker listener is not held back by the broker-wide count ...
            assert await _accepted_within(quotas, INTERNAL, 0.0)
        assert evicted == [1, 2]
        # ... but by its own listener limit, which is max.connections
        assert not await _accepted_within(quotas, INTERNAL, 0.1)
        quotas.released(INTERNAL, "10.0.0.1", False)
        assert await _accepted_within(quotas, INTERNAL, 0.0)

    CLOCK.run(main())


@pytest.mark.parametrize("settings, message", [
    ({"max.connections": 0}, "Invalid max.connections 0"),
    ({"max.connection.creation.rate": 0}, "Invalid max.connection.creation.rate 0"),
    ({"listener.name.client.max.connections": 0}, "Invalid max.connections 0"),
    ({"listener.name.internal.max.connection.creation.rate": 0}, "Invalid max.connection.creation.rate 0"),
])
def test_a_dynamic_limit_below_one_is_refused(settings: dict[str, object], message: str) -> None:

    async def main() -> None:
        quotas = _quotas(asyncio.get_running_loop(), {})
        current = dict(BrokerConfig.build({"quota.window.num": 2}).values)
        with pytest.raises(ConfigError, match=f"^{message}$"):
            quotas.check({**current, **settings})
        quotas.check({**current, "max.connections": 1})

    CLOCK.run(main())


def test_a_static_zero_is_taken_and_other_dynamic_changes_still_pass() -> None:

    async def main() -> None:
        static = {"max.connection.creation.rate": 0}
        quotas = _quotas(asyncio.get_running_loop(), static)
        current = dict(BrokerConfig.build({"quota.window.num": 2, "quota.window.size.seconds": 1,
                                           **static}).values)
        quotas.check({**current, "max.connections.per.ip": 50})

    CLOCK.run(main())


def test_alter_configs_refuses_max_connections_zero_over_the_wire() -> None:
    with Broker() as b, SimpleClient(b.bootstrap_servers) as admin:
        def alter(value: str) -> tuple[int, str | None]:
            body = admin.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "",
                               "configs": [{"name": "max.connections", "config_operation": SET,
                                            "value": value}]}],
                "validate_only": True})
            result = body["responses"][0]
            return result["error_code"], result["error_message"]

        code, message = alter("0")
        assert code == ErrorCode.INVALID_REQUEST  # Kafka 3.2+'s ConfigAdminManager
        assert message is not None and "Invalid max.connections 0" in message
        assert alter("5")[0] == ErrorCode.NONE
