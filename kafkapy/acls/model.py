"""ACLs as data: Kafka's resource types, pattern types, operations and permission types, bindings,
binding filters, and Kafka's rules for matching them.

The enums carry Kafka's names and wire codes (org.apache.kafka.common.acl / .resource); a code
Kafka does not know reads as UNKNOWN, as Kafka's ``fromCode`` does. ResourceType and AclOperation
live in kafkapy.server.operations (the broker's core needs them too) and are re-exported here.
Kafka's ZooKeeper JSON spells the names in Pascal case (``Topic``, ``DescribeConfigs``, ``Allow``:
SecurityUtils' ``toPascalCase``), and reads them back in either case: ``pascal`` and ``from_name``
are that.

Matching (ResourcePatternFilter.matches, AccessControlEntryFilter.matches):

* A filter's ANY (resource type, pattern type, operation, permission type) matches every value;
  a filter's null name, principal or host matches every value.
* Pattern type MATCH in a filter matches the patterns that would apply to a resource of that
  name: a LITERAL pattern of that exact name, the LITERAL wildcard ``*``, and every PREFIXED
  pattern the name starts with. Without a name, MATCH matches every pattern.
* Any other filter pattern type with a name matches that exact name only.
"""

from __future__ import annotations

from typing import TypeVar

import attrs

from kafkapy.server.operations import AclOperation, CodedEnum, ResourceType

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "InvalidAcl",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
    "from_name",
    "pascal",
]

WILDCARD = "*"  # ResourcePattern.WILDCARD_RESOURCE, and AclEntry.WILDCARD_HOST
WILDCARD_PRINCIPAL = "User:*"  # AclEntry.WILDCARD_PRINCIPAL
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name


class PatternType(CodedEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(CodedEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_Enum = ResourceType | PatternType | AclOperation | AclPermissionType
_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


def pascal(value: _Enum) -> str:
    """Kafka's SecurityUtils name: ``DESCRIBE_CONFIGS`` -> ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def from_name(cls: type[_E], name: str) -> _E:
    """Pascal case or upper case without underscores (``DescribeConfigs``, ``DESCRIBECONFIGS``), or
    the enum name (``DESCRIBE_CONFIGS``); UNKNOWN for anything else, as Kafka's SecurityUtils."""
    wanted = name.upper()
    for member in cls:
        if wanted in (member.name, pascal(member).upper()):
            return member
    return cls(0)


class InvalidAcl(ValueError):
    """A binding that cannot be stored (Kafka answers INVALID_REQUEST)."""


@attrs.frozen
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@attrs.frozen
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    pattern: ResourcePattern
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        """InvalidAcl unless this binding may be created (AclControlManager.validateNewAcl, and the
        broker's checks of the CLUSTER name and the principal)."""
        pattern = self.pattern
        if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"Invalid resourceType {pattern.resource_type.name}")
        if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {pattern.pattern_type.name}")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAcl(f"Invalid permissionType {self.permission.name}")
        if not pattern.name:
            raise InvalidAcl("Resource name should not be empty")
        if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        kind, colon, who = self.principal.partition(":")
        if not colon or not kind or not who:
            raise InvalidAcl(f"expected a string in format principalType:principalName but got "
                             f"{self.principal}")
        if not self.host:
            raise InvalidAcl("Invalid empty host")


@attrs.frozen
class AclBindingFilter:
    """Which bindings DescribeAcls lists and DeleteAcls deletes; None and ANY match anything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def any(cls) -> AclBindingFilter:
        return cls(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
                   AclPermissionType.ANY)

    def validate(self) -> None:
        """InvalidAcl when a part is UNKNOWN (AclControlManager.validateFilter)."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise InvalidAcl("Unknown patternFilter.")
        if self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            raise InvalidAcl("Unknown entryFilter.")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and \
                self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that apply to a resource called self.name
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        return self.name.startswith(pattern.name)

    def matches(self, binding: AclBinding) -> bool:
        return (self.matches_pattern(binding.pattern)
                and (self.principal is None or self.principal == binding.principal)
                and (self.host is None or self.host == binding.host)
                and self.operation in (AclOperation.ANY, binding.operation)
                and self.permission in (AclPermissionType.ANY, binding.permission))
