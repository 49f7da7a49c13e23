"""Kafka's CreateTopicPolicy (``create.topic.policy.class.name``): an operator's class that may
refuse a topic before it is created, its refusal answered POLICY_VIOLATION with its message.

The class is named as observers and authorizers are (``pkg.mod:Class`` or ``pkg.mod.Class``), made
with no arguments, given the broker's settings once (``configure(configs)``, when it has one), then
asked ``validate(request)`` for each topic a CreateTopics (``validate_only`` too) or an
auto-creation would make, after kafkapy's own checks passed. ``request`` is Kafka's RequestMetadata:
the name, the partition count and replication factor (None when the request gave an assignment), the
assignment (None when it did not) and the configs the request gave. A policy refuses by raising
:class:`PolicyViolation`; any other exception is the broker's failure (UNKNOWN_SERVER_ERROR, logged),
as in Kafka.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from kafkapy.server.config import ConfigError

__all__ = ["CreateTopicPolicy", "CreateTopicRequest", "PolicyViolation", "load_create_topic_policy"]


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


@runtime_checkable
class CreateTopicPolicy(Protocol):
    def validate(self, request: CreateTopicRequest) -> None:
        """Return to allow the topic; raise PolicyViolation to refuse it."""


def load_create_topic_policy(path: str, configs: Mapping[str, Any]) -> CreateTopicPolicy | None:
    """The policy ``path`` names, configured; None for an empty path. ConfigError if it cannot be
    loaded, has no ``validate``, or refuses its configuration."""
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
        raise ConfigError(f"invalid value {path!r} for create.topic.policy.class.name: {exc!r}") from None
    if not isinstance(policy, CreateTopicPolicy):
        raise ConfigError(f"invalid value {path!r} for create.topic.policy.class.name: it has no validate()")
    return policy
