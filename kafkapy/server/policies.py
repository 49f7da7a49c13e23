"""Operators' policies, as Kafka's plug-ins: CreateTopicPolicy (``create.topic.policy.class.name``,
the topics module) and AlterConfigPolicy (``alter.config.policy.class.name``, the configs module).
Each may refuse a change before it is made; a refusal is answered POLICY_VIOLATION with its message.

A policy class is named as observers and authorizers are (``pkg.mod:Class`` or ``pkg.mod.Class``),
made with no arguments, given the broker's settings once (``configure(configs)``, when it has one),
then asked ``validate(request)`` about each change, after kafkapy's own checks passed, whether or
not the request is ``validate_only``. It refuses by raising :class:`PolicyViolation`; any other
exception is the broker's failure (UNKNOWN_SERVER_ERROR, logged), as in Kafka.

* CreateTopicPolicy is asked about each topic a CreateTopics or an auto-creation would make:
  :class:`CreateTopicRequest`, Kafka's RequestMetadata (the name, the partition count and
  replication factor, None when the request gave an assignment, the assignment, None when it did
  not, and the configs the request gave).
* AlterConfigPolicy is asked about each TOPIC or BROKER resource of an AlterConfigs or
  IncrementalAlterConfigs: :class:`AlterConfigRequest`, the resource and the configs the request
  names with the values it gives (None for a DELETE), as Kafka's ZooKeeper-mode broker asks.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from kafkapy.server.config import ConfigError

__all__ = ["AlterConfigRequest", "CreateTopicRequest", "Policy", "PolicyViolation", "load_policy"]


class PolicyViolation(Exception):
    """Raised by a policy to refuse; its message is the answer's error message."""


@attrs.frozen
class CreateTopicRequest:
    """What a CreateTopicPolicy is asked about (Kafka's CreateTopicPolicy.RequestMetadata)."""

    topic: str
    num_partitions: int | None
    replication_factor: int | None
    replicas_assignments: Mapping[int, tuple[int, ...]] | None
    configs: Mapping[str, str]


@attrs.frozen
class AlterConfigRequest:
    """What an AlterConfigPolicy is asked about (Kafka's AlterConfigPolicy.RequestMetadata):
    the resource (its ConfigResource type and name) and the configs the request names."""

    resource_type: int
    resource_name: str
    configs: Mapping[str, str | None]


@runtime_checkable
class Policy(Protocol):
    def validate(self, request: Any) -> None:
        """Return to allow the change; raise PolicyViolation to refuse it."""


def load_policy(key: str, path: str, configs: Mapping[str, Any]) -> Policy | None:
    """The policy ``path`` (the value of setting ``key``) names, configured; None for an empty
    path. ConfigError if it cannot be loaded, has no ``validate``, or refuses its configuration."""
    if not path:
        return None
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    try:
        policy = getattr(importlib.import_module(module_name), attr)()
        configure = getattr(policy, "configure", None)
        if configure is not None:
            configure(dict(configs))
    except Exception as exc:
        raise ConfigError(f"invalid value {path!r} for {key}: {exc!r}") from None
    if not isinstance(policy, Policy):
        raise ConfigError(f"invalid value {path!r} for {key}: it has no validate()")
    return policy
