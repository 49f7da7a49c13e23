"""Authorization: the pluggable seam, Kafka's ``authorizer.class.name``.

An authorizer answers one question: may this principal, from this address, do
this operation on this resource? Operations and resource types use Kafka's
names (``DESCRIBE_CONFIGS``, ``ALTER_CONFIGS``, ``ALTER`` ... on ``CLUSTER``,
``TOPIC``, ``GROUP``). The default allows everything, as Kafka does with no
authorizer configured. Short names map to built-in authorizers.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

from kafkapy.server.config import ConfigError

__all__ = ["AllowAll", "Authorizer", "load_authorizer"]

CLUSTER_RESOURCE = "kafka-cluster"  # Kafka's name for the one cluster resource

# Built-in authorizers by short name (module:Class), loaded on demand.
SHORT_NAMES: dict[str, str] = {"allowlist": "kafkapy.server.allowlist:AllowListAuthorizer"}


class Authorizer(Protocol):
    def configure(self, configs: Mapping[str, Any]) -> None: ...

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool: ...


class AllowAll:
    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        return True


def load_authorizer(name: str, configs: Mapping[str, Any]) -> Authorizer:
    if not name:
        return AllowAll()
    path = SHORT_NAMES.get(name, name)
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    try:
        authorizer: Authorizer = getattr(importlib.import_module(module_name), attr)()
        authorizer.configure(configs)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"invalid value {name!r} for authorizer.class.name: {exc!r}") from None
    return authorizer
