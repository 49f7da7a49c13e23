"""Authorization: the pluggable seam, Kafka's ``authorizer.class.name``.

An authorizer answers one question: may this principal, from this address, do
this operation on this resource? Operations and resource types use Kafka's
names (``DESCRIBE_CONFIGS``, ``ALTER_CONFIGS``, ``ALTER`` ... on ``CLUSTER``,
``TOPIC``, ``GROUP``). The default allows everything, as Kafka does with no
authorizer configured. Short names (and Kafka's class names of its ACL
authorizers) map to built-in authorizers.

An authorizer whose state lives in the metadata store (the ACL authorizer) also
implements ``StoreBackedAuthorizer``: the broker attaches it to the store once
the store is started, before any request is served, and detaches it at stop.
Authorizers without those methods are called as before.

KIP-430's authorized operations (what Metadata, DescribeCluster, DescribeTopicPartitions and the
group Describe APIs answer when asked) are computed here over ``authorize`` alone, one question per
operation the resource type supports, as Kafka's AuthHelper.authorizedOperations asks its
authorizer: so every authorizer, a user's class that has only ``authorize`` included, answers them
with its own rules (implied operations among them) and none reimplements the bitfield.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from kafkapy.server.config import ConfigError
from kafkapy.server.operations import SUPPORTED_OPERATIONS, ResourceType, to_bitfield
from kafkapy.store.base import MetadataStore

__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "AllowAll", "Authorizer", "ResourceTypeAuthorizer",
           "StoreBackedAuthorizer", "authorized_operations", "load_authorizer"]

CLUSTER_RESOURCE = "kafka-cluster"  # Kafka's name for the one cluster resource
# Int.MinValue, the schemas' default: Kafka's answer when authorized operations were not asked for.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

# Built-in authorizers by short name (module:Class), loaded on demand.
SHORT_NAMES: dict[str, str] = {
    "allowlist": "kafkapy.server.allowlist:AllowListAuthorizer",
    "acl": "kafkapy.acls.authorizer:AclAuthorizer",
    # Kafka's ACL authorizers (ZooKeeper's and KRaft's): the same ACLs, the same rules.
    "kafka.security.authorizer.AclAuthorizer": "kafkapy.acls.authorizer:AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer": "kafkapy.acls.authorizer:AclAuthorizer",
}


class Authorizer(Protocol):
    def configure(self, configs: Mapping[str, Any]) -> None: ...

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool: ...


@runtime_checkable
class StoreBackedAuthorizer(Protocol):
    async def attach(self, store: MetadataStore, loop: asyncio.AbstractEventLoop) -> None:
        """Load what it decides by from ``store`` and follow its changes (the store is started)."""

    async def detach(self) -> None:
        """Stop following the store (the broker is stopping)."""


@runtime_checkable
class ResourceTypeAuthorizer(Protocol):
    def authorize_any(self, principal: str, client_address: str, operation: str, resource_type: str) -> bool:
        """Kafka's authorizeByResourceType: may the principal do ``operation`` on some resource of
        this type? (InitProducerId without a transactional id: WRITE on any topic will do.)"""


class AllowAll:
    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        return True


# With no authorizer (AllowAll), Kafka answers every supported operation: one constant per type.
_EVERY_SUPPORTED: dict[ResourceType, int] = {kind: to_bitfield(operations)
                                            for kind, operations in SUPPORTED_OPERATIONS.items()}


def authorized_operations(authorizer: Authorizer, principal: str, client_address: str,
                          resource_type: ResourceType, resource_name: str) -> int:
    """KIP-430's bitfield for one resource: bit ``1 << code`` for each operation the resource type
    supports (AclEntry.supportedOperations) that ``authorize`` allows the principal."""
    if type(authorizer) is AllowAll:  # exactly: a subclass may decide otherwise
        return _EVERY_SUPPORTED[resource_type]  # what the loop below would answer, without asking
    return to_bitfield(operation for operation in SUPPORTED_OPERATIONS[resource_type]
                       if authorizer.authorize(principal, client_address, operation.name, resource_type.name,
                                               resource_name))


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
