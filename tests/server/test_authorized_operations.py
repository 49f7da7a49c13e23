"""KIP-430's authorized operations over the authorizer seam (kafkapy.server.auth.authorized_operations):
Kafka's table of supported operations, the bitfield, and the answer of every kind of authorizer held
to the seam's definition (the supported operations ``authorize`` allows). The ACL authorizer's own
property test is in tests/acls/test_authorized_operations_model.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.server.allowlist import AllowListAuthorizer
from kafkapy.server.auth import AllowAll, Authorizer, authorized_operations, load_authorizer
from kafkapy.server.operations import (
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    from_bitfield,
    to_bitfield,
)

Op = AclOperation
CONCRETE_TYPES = list(SUPPORTED_OPERATIONS)


def by_definition(authorizer: Authorizer, principal: str, address: str, resource_type: ResourceType,
                  name: str) -> frozenset[AclOperation]:
    """The seam's definition, asked one operation at a time."""
    return frozenset(op for op in SUPPORTED_OPERATIONS[resource_type]
                     if authorizer.authorize(principal, address, op.name, resource_type.name, name))


def test_supported_operations_are_kafkas() -> None:
    """AclEntry.supportedOperations (groups have DESCRIBE_CONFIGS and ALTER_CONFIGS since KAFKA-14510)."""
    assert {kind: set(ops) for kind, ops in SUPPORTED_OPERATIONS.items()} == {
        ResourceType.TOPIC: {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                             Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
        ResourceType.GROUP: {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
        ResourceType.CLUSTER: {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                               Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE},
        ResourceType.TRANSACTIONAL_ID: {Op.DESCRIBE, Op.WRITE},
        ResourceType.DELEGATION_TOKEN: {Op.DESCRIBE},
        ResourceType.USER: {Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS},
    }
    for operations in SUPPORTED_OPERATIONS.values():
        assert len(set(operations)) == len(operations)


def test_bitfield_is_kafkas_32_bit_field() -> None:
    """Utils.to32BitField: READ (3) and DESCRIBE (8) are 0b1_0000_1000; Int.MinValue reads as none."""
    assert to_bitfield([Op.READ, Op.DESCRIBE]) == 0b1_0000_1000 == 264
    assert from_bitfield(264) == {Op.READ, Op.DESCRIBE}
    assert from_bitfield(-2147483648) == frozenset()
    assert to_bitfield(Op) < 2**31  # every code fits a signed 32-bit field


@given(st.frozensets(st.sampled_from(list(Op))))
def test_bitfield_round_trips(operations: frozenset[AclOperation]) -> None:
    assert from_bitfield(to_bitfield(operations)) == operations


class OnlyAuthorize:
    """A user's authorizer (a dotted-path class) with nothing but configure and authorize: the
    principal may do what its name lists, on resources whose name starts with ``own``."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        return resource_name.startswith("own") and operation in principal.split(":")[1].split("+")


class GenerousAllowAll(AllowAll):
    """AllowAll by inheritance but not by decision: the fast path must not mistake it for AllowAll."""

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        return operation == "READ"


@pytest.mark.parametrize("resource_type", CONCRETE_TYPES)
def test_no_authorizer_answers_every_supported_operation(resource_type: ResourceType) -> None:
    """AllowAll's constant (the fast path) equals asking authorize() for each operation."""
    answer = authorized_operations(AllowAll(), "User:ANONYMOUS", "127.0.0.1", resource_type, "x")
    assert answer == to_bitfield(SUPPORTED_OPERATIONS[resource_type])
    plain = by_definition(AllowAll(), "User:ANONYMOUS", "127.0.0.1", resource_type, "x")
    assert from_bitfield(answer) == plain


def test_a_subclass_of_allow_all_is_asked() -> None:
    answer = authorized_operations(GenerousAllowAll(), "User:a", "127.0.0.1", ResourceType.TOPIC, "t")
    assert from_bitfield(answer) == {Op.READ}


def test_a_user_class_with_only_authorize_answers_by_its_rules() -> None:
    authorizer = load_authorizer(f"{__name__}.OnlyAuthorize", {})
    assert from_bitfield(authorized_operations(authorizer, "User:READ+ALTER+CLUSTER_ACTION", "10.0.0.1",
                                               ResourceType.TOPIC, "own-t")) == {Op.READ, Op.ALTER}
    assert from_bitfield(authorized_operations(authorizer, "User:READ+ALTER+CLUSTER_ACTION", "10.0.0.1",
                                               ResourceType.CLUSTER, "own")) == {Op.ALTER, Op.CLUSTER_ACTION}
    assert authorized_operations(authorizer, "User:READ", "10.0.0.1", ResourceType.TOPIC, "theirs") == 0


RULES = st.lists(st.tuples(st.sampled_from(["*", "User:alice", "User:bob"]),
                           st.sampled_from(["*", "10.0.0.0/8", "192.168.0.1"]),
                           st.frozensets(st.sampled_from(["ALL", "READ", "WRITE", "ALTER", "DESCRIBE",
                                                          "ALTER_CONFIGS", "CLUSTER_ACTION", "DELETE"]),
                                         min_size=1)), max_size=4)


@given(rules=RULES, principal=st.sampled_from(["User:alice", "User:bob", "User:admin"]),
       address=st.sampled_from(["10.1.2.3", "192.168.0.1", "::ffff:10.0.0.1"]),
       resource_type=st.sampled_from(CONCRETE_TYPES))
def test_allowlist_answers_the_seams_definition(rules: list[tuple[str, str, frozenset[str]]], principal: str,
                                                address: str, resource_type: ResourceType) -> None:
    """The allowlist authorizer's implications (ALTER -> DESCRIBE, ALTER_CONFIGS -> DESCRIBE_CONFIGS)
    come through authorize(); a super user gets every supported operation."""
    authorizer = AllowListAuthorizer()
    text = ";".join(f"{who}@{where}:{','.join(sorted(ops))}" for who, where, ops in rules)
    authorizer.configure({"super.users": "User:admin", "allowlist.rules": text})
    answer = from_bitfield(authorized_operations(authorizer, principal, address, resource_type, "r"))
    assert answer == by_definition(authorizer, principal, address, resource_type, "r")
    if principal == "User:admin":
        assert answer == set(SUPPORTED_OPERATIONS[resource_type])
