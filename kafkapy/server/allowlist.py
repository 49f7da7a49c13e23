"""The allow-list authorizer: ``authorizer.class.name=allowlist``.

Grants everything to ``super.users`` (Kafka's format, ``User:alice;User:bob``)
and what ``allowlist.rules`` grants; denies the rest. A rule is
``PRINCIPAL@ADDRESS:OPERATION[,OPERATION...]`` and rules are separated by ``;``:

* PRINCIPAL: ``User:bob``, ``User:CN=alice,O=Acme`` (an SSL subject), or ``*`` for anyone
  (``User:*`` too).
* ADDRESS: an IP address, a CIDR block (``10.0.0.0/8``, ``::1/128``) or ``*``.
* OPERATION: Kafka's operation names (``DESCRIBE_CONFIGS``, ``ALTER_CONFIGS``,
  ``DESCRIBE``, ``ALTER``, ``CLUSTER_ACTION``...) or ``ALL``. As in Kafka's ACLs,
  ``ALTER_CONFIGS`` implies ``DESCRIBE_CONFIGS`` and ``ALTER`` implies ``DESCRIBE``.

A rule grants its operations on every resource. Example::

    authorizer.class.name=allowlist
    super.users=User:admin
    allowlist.rules=User:bob@10.0.0.0/8:DESCRIBE_CONFIGS;*@127.0.0.1:ALTER_CONFIGS
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

import attrs

from kafkapy.server.config import ConfigError
from kafkapy.server.operations import AclOperation

__all__ = ["AllowListAuthorizer", "Rule", "parse_rules", "parse_super_users"]

# Every operation an ACL can name (Kafka's AclOperation without UNKNOWN and ANY).
OPERATIONS = frozenset(op.name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))
# Kafka's AclAuthorizer: an allow of the key also allows each of its values.
IMPLIED = {"ALTER_CONFIGS": ("DESCRIBE_CONFIGS",), "ALTER": ("DESCRIBE",), "READ": ("DESCRIBE",),
           "WRITE": ("DESCRIBE",), "DELETE": ("DESCRIBE",)}

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@attrs.frozen
class Rule:
    principal: str  # "*" for anyone
    network: Network | None  # None for any address
    operations: frozenset[str]

    def grants(self, principal: str, address: str, operation: str) -> bool:
        if self.principal not in ("*", "User:*", principal):
            return False
        if self.network is not None:
            try:
                ip = ipaddress.ip_address(address.split("%", 1)[0])
            except ValueError:
                return False
            if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
                ip = ip.ipv4_mapped
            if ip.version != self.network.version or ip not in self.network:
                return False
        return "ALL" in self.operations or operation in self.operations


def parse_super_users(text: str) -> frozenset[str]:
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def parse_rules(text: str) -> list[Rule]:
    rules = []
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        head, sep, ops = item.rpartition(":")
        principal, at, address = head.rpartition("@")
        if not sep or not at or not principal or not address:
            raise ConfigError(f"invalid value {text!r} for allowlist.rules: {item!r} is not "
                              "PRINCIPAL@ADDRESS:OPERATION[,OPERATION]")
        operations = {op.strip().upper() for op in ops.split(",") if op.strip()}
        unknown = operations - OPERATIONS
        if not operations or unknown:
            raise ConfigError(f"invalid value {text!r} for allowlist.rules: unknown operation "
                              f"{', '.join(sorted(unknown)) or '(none)'} in {item!r}")
        for op in list(operations):
            operations.update(IMPLIED.get(op, ()))
        network: Network | None = None
        if address.strip() != "*":
            try:
                network = ipaddress.ip_network(address.strip().strip("[]"), strict=False)
            except ValueError:
                raise ConfigError(f"invalid value {text!r} for allowlist.rules: {address!r} is not an "
                                  "address, a CIDR block or *") from None
        rules.append(Rule(principal.strip(), network, frozenset(operations)))
    return rules


class AllowListAuthorizer:
    def __init__(self) -> None:
        self.super_users: frozenset[str] = frozenset()
        self.rules: list[Rule] = []

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.super_users = parse_super_users(str(configs.get("super.users") or ""))
        self.rules = parse_rules(str(configs.get("allowlist.rules") or ""))

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        if principal in self.super_users:
            return True
        return any(rule.grants(principal, client_address, operation) for rule in self.rules)
