"""Kafka's operations and resource types, with their wire codes, and which operations each
resource type supports (org.apache.kafka.common.acl.AclOperation, .resource.ResourceType,
AclEntry.supportedOperations).

They sit at the server layer because the broker needs them below any module: the authorizer seam
names operations by these names, and KIP-430's authorized operations are a bitfield of these codes
(Metadata and DescribeCluster are answered by the server's core module). kafkapy.acls re-exports
the two enums with the rest of its ACL model.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import TypeVar

__all__ = ["SUPPORTED_OPERATIONS", "AclOperation", "CodedEnum", "ResourceType", "from_bitfield",
           "to_bitfield"]


_C = TypeVar("_C", bound="CodedEnum")


class CodedEnum(enum.IntEnum):
    """An enum of Kafka wire codes whose code 0 is UNKNOWN."""

    @classmethod
    def from_code(cls: type[_C], code: int) -> _C:
        """The member of that code, or UNKNOWN for a code Kafka does not know (its ``fromCode``)."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(CodedEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(CodedEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


_O = AclOperation
# What an ACL on a resource of each concrete type can grant: Kafka's AclEntry.supportedOperations,
# in code order (the order authorized operations are asked in).
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DELETE, _O.DESCRIBE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                           _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (_O.WRITE, _O.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


def to_bitfield(operations: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit ``1 << code`` for each operation (every code is below 32)."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


def from_bitfield(field: int) -> frozenset[AclOperation]:
    """The known operations whose bits are set (Utils.from32BitField, then AclOperation.fromCode)."""
    return frozenset(operation for operation in AclOperation if field >= 0 and field >> operation & 1)
