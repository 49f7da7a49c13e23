"""The ACL authorizer against models: create/delete/describe against a plain set of bindings, and
authorize() against a direct reading of Kafka's rules (StandardAuthorizerData.findAclRule and
findResult), with a second authorizer on another store handle (another broker) that must follow
every change through the store's notifications."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.acls.authorizer import AclAuthorizer
from kafkapy.acls.model import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkapy.store.memory import MemoryStore

ALL, DENY, ALLOW = AclOperation.ALL, AclPermissionType.DENY, AclPermissionType.ALLOW
CONCRETE_TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID]
NAMES = st.sampled_from(["a", "ab", "abc", "b", "*", "ba"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
OPERATIONS = st.sampled_from([op for op in AclOperation
                              if op not in (AclOperation.UNKNOWN, AclOperation.ANY)])
QUERY_OPERATIONS = st.sampled_from([op for op in AclOperation
                                    if op not in (AclOperation.UNKNOWN, AclOperation.ANY, ALL)])


@st.composite
def valid_bindings(draw: Any) -> AclBinding:
    resource_type = draw(st.sampled_from([*CONCRETE_TYPES, ResourceType.CLUSTER]))
    name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else draw(NAMES)
    pattern_type = draw(st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]))
    return AclBinding(ResourcePattern(resource_type, name, pattern_type), draw(PRINCIPALS), draw(HOSTS),
                      draw(OPERATIONS), draw(st.sampled_from([ALLOW, DENY])))


def any_code(enum: Any) -> Any:
    return st.sampled_from(list(enum))


# Any binding at all: valid ones, and ones with UNKNOWN/ANY/MATCH parts, bad names and principals.
any_bindings = st.one_of(valid_bindings(), st.builds(
    AclBinding, st.builds(ResourcePattern, any_code(ResourceType), st.sampled_from(["", "a", CLUSTER_NAME]),
                          any_code(PatternType)),
    st.sampled_from(["User:alice", "alice", ":x", "User:"]), st.sampled_from(["*", ""]),
    any_code(AclOperation), any_code(AclPermissionType)))

filters = st.builds(AclBindingFilter, any_code(ResourceType), st.one_of(st.none(), NAMES),
                    any_code(PatternType), st.one_of(st.none(), PRINCIPALS), st.one_of(st.none(), HOSTS),
                    any_code(AclOperation), any_code(AclPermissionType))


def kafka_decision(bindings: set[AclBinding], super_users: frozenset[str], allow_if_none: bool,
                   principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                   name: str) -> bool:
    """Kafka's rules, read straight off the bindings (no tables, no cache)."""
    if principal in super_users:
        return True
    applying = [b for b in bindings if b.pattern.resource_type == resource_type and (
        (b.pattern.pattern_type == PatternType.LITERAL and b.pattern.name in (name, "*"))
        or (b.pattern.pattern_type == PatternType.PREFIXED and name.startswith(b.pattern.name)))]
    if not applying:
        return allow_if_none
    counting = [b for b in applying if b.principal in (principal, "User:*") and b.host in (host, "*")]

    def covers(b: AclBinding) -> bool:  # findResult's operation match
        if b.operation == ALL or b.operation == operation:
            return True
        if b.permission == ALLOW and operation == AclOperation.DESCRIBE:
            return b.operation in (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                   AclOperation.ALTER)
        if b.permission == ALLOW and operation == AclOperation.DESCRIBE_CONFIGS:
            return b.operation == AclOperation.ALTER_CONFIGS
        return False

    if any(b.permission == DENY and covers(b) for b in counting):
        return False
    return any(b.permission == ALLOW and covers(b) for b in counting)


QUERIES = [(principal, host, operation, resource_type, name)
           for principal in ("User:alice", "User:bob", "User:carol")
           for host in ("10.0.0.1", "10.0.0.3")
           for operation in (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.WRITE,
                             AclOperation.DESCRIBE_CONFIGS)
           for resource_type in (ResourceType.TOPIC, ResourceType.GROUP)
           for name in ("a", "abc", "b", "c")]


async def _attached(store: MemoryStore, **configs: Any) -> AclAuthorizer:
    authorizer = AclAuthorizer()
    authorizer.configure(configs)
    await authorizer.attach(store, asyncio.get_running_loop())
    return authorizer


@settings(max_examples=150, deadline=None)
@given(bindings=st.sets(valid_bindings(), max_size=12), allow_if_none=st.booleans(),
       principal=st.sampled_from(["User:alice", "User:bob", "User:admin"]),
       host=st.sampled_from(["10.0.0.1", "10.0.0.2", "::ffff:10.0.0.1"]), operation=QUERY_OPERATIONS,
       resource_type=st.sampled_from(CONCRETE_TYPES), name=st.sampled_from(["a", "abc", "b", "bab", "*"]))
def test_authorize_is_kafkas_rules(bindings: set[AclBinding], allow_if_none: bool, principal: str,
                                   host: str, operation: AclOperation, resource_type: ResourceType,
                                   name: str) -> None:
    async def decide() -> bool:
        authorizer = await _attached(MemoryStore(), **{"super.users": "User:admin",
                                                       "allow.everyone.if.no.acl.found": allow_if_none})
        assert await authorizer.create_acls(list(bindings)) == [None] * len(bindings)
        first = authorizer.authorize(principal, host, operation.name, resource_type.name, name)
        again = authorizer.authorize(principal, host, operation.name, resource_type.name, name)
        assert again == first  # from the cache
        await authorizer.detach()
        return first

    expected = kafka_decision(bindings, frozenset({"User:admin"}), allow_if_none, principal,
                              host.removeprefix("::ffff:"), operation, resource_type, name)
    assert asyncio.run(decide()) == expected


def test_authorize_by_resource_type_follows_kafka() -> None:
    """authorizeByResourceType (InitProducerId's WRITE on any topic): a literal or prefixed allow
    counts unless a denied prefix dominates it; a wildcard deny refuses everything."""
    def binding(name: str, pattern: PatternType, permission: AclPermissionType) -> AclBinding:
        return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern), "User:alice", "*",
                          AclOperation.WRITE, permission)

    cases = [
        ([], False),
        ([binding("orders", PatternType.LITERAL, ALLOW)], True),
        ([binding("orders", PatternType.LITERAL, ALLOW), binding("orders", PatternType.LITERAL, DENY)],
         False),
        ([binding("orders", PatternType.LITERAL, ALLOW), binding("ord", PatternType.PREFIXED, DENY)], False),
        ([binding("orders", PatternType.PREFIXED, ALLOW), binding("x", PatternType.PREFIXED, DENY)], True),
        ([binding("*", PatternType.LITERAL, ALLOW)], True),
        ([binding("orders", PatternType.LITERAL, ALLOW), binding("*", PatternType.LITERAL, DENY)], False),
    ]

    async def check() -> None:
        for bindings, expected in cases:
            authorizer = await _attached(MemoryStore())
            await authorizer.create_acls(bindings)
            assert authorizer.authorize_any("User:alice", "10.0.0.1", "WRITE", "TOPIC") == expected, bindings
            assert not authorizer.authorize_any("User:bob", "10.0.0.1", "WRITE", "TOPIC")
            await authorizer.detach()

    asyncio.run(check())


class AclMachine(RuleBasedStateMachine):
    """CreateAcls, DeleteAcls and DescribeAcls on one broker's authorizer against a set of bindings;
    authorize() against Kafka's rules; a peer broker's authorizer follows every change."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        store = MemoryStore()
        self.authorizer = self.loop.run_until_complete(_attached(store))
        self.peer = self.loop.run_until_complete(_attached(store.peer(),
                                                           **{"allow.everyone.if.no.acl.found": True}))
        self.model: set[AclBinding] = set()

    def teardown(self) -> None:
        for authorizer in (self.authorizer, self.peer):
            self.loop.run_until_complete(authorizer.detach())
        self.loop.close()

    @rule(bindings=st.lists(any_bindings, max_size=5))
    def create(self, bindings: list[AclBinding]) -> None:
        results = self.loop.run_until_complete(self.authorizer.create_acls(bindings))
        for binding, result in zip(bindings, results, strict=True):
            try:
                binding.validate()
            except InvalidAcl:
                assert isinstance(result, InvalidAcl)
                continue
            assert result is None
            self.model.add(binding)

    @rule(chosen=st.lists(filters, max_size=3))
    def delete(self, chosen: list[AclBindingFilter]) -> None:
        results = self.loop.run_until_complete(self.authorizer.delete_acls(chosen))
        for acl_filter, result in zip(chosen, results, strict=True):
            try:
                acl_filter.validate()
            except InvalidAcl:
                assert isinstance(result, InvalidAcl)
                continue
            assert isinstance(result, list)
            assert set(result) == {b for b in self.model if acl_filter.matches(b)}
        for acl_filter in chosen:
            if not isinstance(results[chosen.index(acl_filter)], InvalidAcl):
                self.model -= {b for b in self.model if acl_filter.matches(b)}

    @rule(acl_filter=filters)
    def describe(self, acl_filter: AclBindingFilter) -> None:
        try:
            acl_filter.validate()
        except InvalidAcl:
            return
        assert set(self.authorizer.acls(acl_filter)) == {b for b in self.model if acl_filter.matches(b)}

    @invariant()
    def authorize_is_kafkas_rules(self) -> None:
        for principal, host, operation, resource_type, name in QUERIES:
            expected = kafka_decision(self.model, frozenset(), False, principal, host, operation,
                                      resource_type, name)
            decided = self.authorizer.authorize(principal, host, operation.name, resource_type.name, name)
            assert decided == expected, (principal, host, operation, resource_type, name)

    @invariant()
    def the_peer_follows(self) -> None:
        self.loop.run_until_complete(self.peer.settled())
        assert set(self.peer.acls(AclBindingFilter.any())) == self.model
        for principal, host, operation, resource_type, name in itertools.islice(QUERIES, 0, None, 7):
            assert self.peer.authorize(principal, host, operation.name, resource_type.name, name) == \
                kafka_decision(self.model, frozenset(), True, principal, host, operation, resource_type, name)


TestAclMachine = AclMachine.TestCase
TestAclMachine.settings = settings(max_examples=60, stateful_step_count=15, deadline=None)


def test_the_host_is_the_address_as_java_writes_it() -> None:
    """StandardAuthorizerData compares the ACL's host with InetAddress.getHostAddress(): IPv6 in
    full, lower-case groups without leading zeros; an IPv4-mapped address as IPv4."""
    def read_from(host: str) -> AclBinding:
        return AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL), "User:alice", host,
                          AclOperation.READ, ALLOW)

    async def check() -> None:
        authorizer = await _attached(MemoryStore())
        await authorizer.create_acls([read_from("fe80:0:0:0:0:0:0:abcd"), read_from("::1"),
                                      read_from("10.0.0.1"), read_from("2001:db8:0:0:0:0:0:1%eth0")])
        allowed = {address: authorizer.authorize("User:alice", address, "READ", "TOPIC", "t")
                   for address in ("fe80::abcd", "FE80::ABCD", "fe80:0000::abcd", "::1", "::ffff:10.0.0.1",
                                   "10.0.0.1", "2001:db8::1%eth0", "2001:db8::1")}
        await authorizer.detach()
        assert allowed == {"fe80::abcd": True, "FE80::ABCD": True, "fe80:0000::abcd": True,
                           "::1": False,  # Java writes it 0:0:0:0:0:0:0:1, which no ACL names
                           "::ffff:10.0.0.1": True, "10.0.0.1": True, "2001:db8::1%eth0": True,
                           "2001:db8::1": False}

    asyncio.run(check())
