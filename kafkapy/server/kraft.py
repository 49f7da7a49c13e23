"""What kafkapy takes from a KRaft server.properties: the process's roles and its controller listeners.

A KRaft config (Kafka's config/kraft/server.properties, the apache/kafka image's default, a
docker-compose's ``KAFKA_PROCESS_ROLES``) names the roles of the process (``broker``,
``controller`` or both) and, in ``controller.listener.names``, the listeners that belong to the
controller. kafkapy has no KRaft controller: its metadata lives in memory or in ZooKeeper. So a
process with the broker role serves its broker listeners only, as Kafka's broker does (Kafka's
``dataPlaneListeners`` and ``effectiveAdvertisedBrokerListeners`` leave the controller's out: a
client is never told of them), and a controller-only process is refused, naming what to do.

Kafka's own checks of these keys (KafkaConfig.validateValues) are made in its order and words, so
a file kafkapy starts from starts Kafka too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkapy.server.config import BrokerConfig, ConfigError

__all__ = ["BROKER_ROLE", "CONTROLLER_ROLE", "broker_listener_names", "controller_listener_names",
           "process_roles"]

BROKER_ROLE, CONTROLLER_ROLE = "broker", "controller"
_ROLES_KEY, _NAMES_KEY = "process.roles", "controller.listener.names"


def process_roles(config: BrokerConfig) -> frozenset[str]:
    """The roles of ``process.roles`` (empty: not KRaft), repeated ones refused as Kafka refuses them
    (an unknown one is refused by the key's validator first)."""
    roles: list[str] = list(config[_ROLES_KEY] or ())
    if len(set(roles)) != len(roles):
        raise ConfigError(f"Duplicate role names found in `{_ROLES_KEY}`: {_scala_list(roles)}")
    return frozenset(roles)


def controller_listener_names(config: BrokerConfig) -> list[str]:
    """``controller.listener.names`` as Kafka splits it: on commas, names kept as written (Kafka
    compares them with the listeners' upper-case names, so ``controller`` names no listener)."""
    value = config[_NAMES_KEY] or ""
    return value.split(",") if value else []


def broker_listener_names(config: BrokerConfig, listeners: Sequence[str]) -> list[str]:
    """The listeners this process serves as a broker (``listeners``' names, in order), after Kafka's
    checks of the KRaft keys; a controller-only process is refused here, as kafkapy runs no
    controller (kafkapy.server.listeners then checks the advertised ones)."""
    roles = process_roles(config)
    controllers = controller_listener_names(config)
    if not roles:
        if controllers and not config["zookeeper.metadata.migration.enable"]:
            raise ConfigError(f"{_NAMES_KEY} must be empty when not running in KRaft mode: "
                              f"{_java_list(controllers)}")
        return list(listeners)
    if config["node.id"] < 0:
        raise ConfigError("Missing configuration `node.id` which is required when `process.roles` is "
                          "defined (i.e. when running in KRaft mode).")
    if roles == {CONTROLLER_ROLE}:
        raise ConfigError(
            f"{_ROLES_KEY}=controller: kafkapy runs no KRaft controller (its metadata is kept in memory, "
            "or in ZooKeeper with zookeeper.connect), so a controller-only node has nothing to serve: "
            "leave it out, and start each broker with process.roles=broker or broker,controller")
    # Kafka's checks that the node is (combined) or is not (broker only) among controller.quorum.voters
    # are not made: they concern a quorum kafkapy does not run, and would refuse the members of a
    # cluster kafkapy derives from one file (Broker(brokers=N), serve --brokers N), ids 1, 2, 3...
    _require_a_quorum(config)
    if roles == {BROKER_ROLE}:
        if not controllers:
            raise ConfigError(f"{_NAMES_KEY} must contain at least one value when running KRaft with just "
                              "the broker role")
        if set(controllers) & set(listeners):
            raise ConfigError(f"{_NAMES_KEY} must not contain a value appearing in the 'listeners' "
                              "configuration when running KRaft with just the broker role")
    else:  # broker,controller: the combined node of config/kraft/server.properties
        if not set(controllers) & set(listeners):
            raise ConfigError(f"{_NAMES_KEY} must contain at least one value appearing in the 'listeners' "
                              "configuration when running the KRaft controller role")
        if not set(controllers) <= set(listeners):
            raise ConfigError(f"{_NAMES_KEY} must only contain values appearing in the 'listeners' "
                              "configuration when running the KRaft controller role")
    return [name for name in listeners if name not in controllers]


def _require_a_quorum(config: BrokerConfig) -> None:
    if not config["controller.quorum.voters"] and not config["controller.quorum.bootstrap.servers"]:
        raise ConfigError(f"If using {_ROLES_KEY}, either controller.quorum.bootstrap.servers must contain "
                          "the set of bootstrap controllers or controller.quorum.voters must contain a "
                          "parseable set of controllers.")


def _scala_list(items: Sequence[Any]) -> str:
    return "ArrayBuffer(" + ", ".join(str(item) for item in items) + ")"


def _java_list(items: Sequence[Any]) -> str:
    return "[" + ", ".join(str(item) for item in items) + "]"
