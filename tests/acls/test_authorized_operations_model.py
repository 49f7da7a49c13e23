"""KIP-430's authorized operations with the ACL authorizer: for random ACLs, the bitfield is the set
of supported operations ``authorize`` allows (the seam's definition), and that set is what Kafka's
rules, read straight off the bindings, allow (implied operations included)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.acls.model import CLUSTER_NAME, AclBinding, ResourceType
from kafkapy.server.auth import authorized_operations
from kafkapy.server.operations import SUPPORTED_OPERATIONS, from_bitfield
from kafkapy.store.memory import MemoryStore
from tests.acls.test_authorizer_model import _attached, kafka_decision, valid_bindings

TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID]


@settings(max_examples=150, deadline=None)
@given(bindings=st.sets(valid_bindings(), max_size=12), allow_if_none=st.booleans(),
       principal=st.sampled_from(["User:alice", "User:bob", "User:admin"]),
       host=st.sampled_from(["10.0.0.1", "10.0.0.2", "::ffff:10.0.0.1"]),
       resource_type=st.sampled_from(TYPES), name=st.sampled_from(["a", "abc", "b", "bab", "*"]))
def test_bitfield_is_what_authorize_and_kafkas_rules_allow(
        bindings: set[AclBinding], allow_if_none: bool, principal: str, host: str,
        resource_type: ResourceType, name: str) -> None:
    name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else name

    async def answers() -> tuple[int, frozenset[object]]:
        authorizer = await _attached(MemoryStore(), **{"super.users": "User:admin",
                                                       "allow.everyone.if.no.acl.found": allow_if_none})
        assert await authorizer.create_acls(list(bindings)) == [None] * len(bindings)
        field = authorized_operations(authorizer, principal, host, resource_type, name)
        asked = frozenset(op for op in SUPPORTED_OPERATIONS[resource_type]
                          if authorizer.authorize(principal, host, op.name, resource_type.name, name))
        await authorizer.detach()
        return field, asked

    field, asked = asyncio.run(answers())
    assert from_bitfield(field) == asked
    assert asked == {op for op in SUPPORTED_OPERATIONS[resource_type]
                     if kafka_decision(bindings, frozenset({"User:admin"}), allow_if_none, principal,
                                       host.removeprefix("::ffff:"), op, resource_type, name)}
    if principal == "User:admin":
        assert asked == set(SUPPORTED_OPERATIONS[resource_type])
