"""The ACL authorizer: ``authorizer.class.name=acl`` (or Kafka's class names
``kafka.security.authorizer.AclAuthorizer`` and
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``).

Theory of operation. ACLs live in the metadata store (kafkapy.store.base.AclStore: Kafka's
/kafka-acl tree on ZooKeeper), so every broker of a cluster enforces the same ones. Each broker
keeps all of them in memory, as Kafka's authorizers do: loaded when the broker attaches the
authorizer (before it serves), then kept current by the store's change notifications (a changed
resource is read again; a Reloader runs the reads one batch at a time on the broker's loop). A
broker's own writes update its memory at once, so a client that created an ACL sees it in the
next DescribeAcls on the same broker.

Writes compare-and-set on the resource's version and retry on a conflict (Kafka's
updateResourceAcls), so brokers writing the same resource at once lose nothing.

Deciding (StandardAuthorizerData.findAclRule and findResult, Kafka's semantics):

1. a principal in ``super.users`` may do anything;
2. the ACLs that apply to a resource are its LITERAL ones, the LITERAL wildcard ``*`` of its type,
   and the PREFIXED ones its name starts with; with none at all, the answer is
   ``allow.everyone.if.no.acl.found`` (default false);
3. of those, an ACL counts when its principal is the caller's or ``User:*`` and its host is the
   caller's address (as Java writes it: ``_host``) or ``*``;
4. any counting DENY for the operation (or ALL) denies; otherwise any counting ALLOW for it (or
   ALL, or an operation that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
   implies DESCRIBE_CONFIGS) allows; otherwise denied. Implication works for ALLOW only: a DENY of
   READ does not deny DESCRIBE.

Produce asks on its hot path, so the ACLs that apply to a resource are worked out once per
(resource type, name), and each answer once per question, and kept until the next change (two
bounded caches, dropped whole by every change).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from kafkapy.acls.model import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_name,
    pascal,
)
from kafkapy.server.allowlist import parse_super_users
from kafkapy.server.config import ConfigError
from kafkapy.server.connection import java_host_address as _host
from kafkapy.store.base import (
    AclResource,
    AclVersionConflict,
    MetadataStore,
    StoredAcl,
    StoreError,
    Watch,
    check_acl_resource,
)
from kafkapy.store.onloop import Reloader

__all__ = ["Ace", "AclAuthorizer"]

log = logging.getLogger(__name__)

# An ALLOW of any of these also allows DESCRIBE (resp. DESCRIBE_CONFIGS): Kafka's IMPLIES_DESCRIBE.
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
# How many resources' applicable ACLs, and how many answers, are kept worked out; past it a cache
# starts over (a client naming endless groups must not grow the broker without bound).
MATCHING_CACHE_SIZE = 10_000
DECISION_CACHE_SIZE = 10_000
# A write that keeps losing compare-and-set races gives up (Kafka's AclAuthorizer retries forever
# in a loop bounded by its ZooKeeper session; a bounded number keeps a request from hanging).
WRITE_ATTEMPTS = 50


@attrs.frozen
class Ace:
    """An access control entry: who, from where, what, allowed or denied."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def stored(self) -> StoredAcl:
        return StoredAcl(self.principal, pascal(self.permission), pascal(self.operation), self.host)


def _ace(stored: StoredAcl) -> Ace | None:
    operation = from_name(AclOperation, stored.operation)
    permission = from_name(AclPermissionType, stored.permission_type)
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY) or permission not in (
            AclPermissionType.ALLOW, AclPermissionType.DENY):
        return None
    return Ace(stored.principal, stored.host, operation, permission)


def _pattern(resource: AclResource) -> ResourcePattern | None:
    resource_type = from_name(ResourceType, resource.resource_type)
    pattern_type = from_name(PatternType, resource.pattern_type)
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or pattern_type not in (
            PatternType.LITERAL, PatternType.PREFIXED):
        return None
    return ResourcePattern(resource_type, resource.name, pattern_type)


def _resource(pattern: ResourcePattern) -> AclResource:
    return AclResource(pattern.pattern_type.name, pascal(pattern.resource_type), pattern.name)


def _storable(pattern: ResourcePattern) -> None:
    """InvalidAcl for a pattern no node of Kafka's ACL tree can hold (a name with ``/``, ``.``...)."""
    try:
        check_acl_resource(_resource(pattern))
    except StoreError as exc:
        raise InvalidAcl(str(exc)) from None


class AclAuthorizer:
    """Kafka's ACL authorizer over the cluster's metadata store: authorize() for every module, and
    Kafka's Authorizer.acls/createAcls/deleteAcls for the ACL APIs (kafkapy.acls.module)."""

    def __init__(self) -> None:
        self.super_users: frozenset[str] = frozenset()
        self.allow_if_no_acl = False
        self._acls: dict[ResourcePattern, frozenset[Ace]] = {}
        self._literal: dict[tuple[ResourceType, str], frozenset[Ace]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[Ace]]] = {}
        # (resource type name, resource name) -> the ACEs that apply, as authorize() is asked
        self._matching: dict[tuple[str, str], tuple[Ace, ...]] = {}
        # authorize()'s arguments -> its answer, until the ACLs change
        self._decisions: dict[tuple[str, str, str, str, str], bool] = {}
        self._store: MetadataStore | None = None
        self._watch: Watch | None = None
        self._reloads: Reloader | None = None
        self._dirty: set[AclResource] = set()
        self._dirty_lock = threading.Lock()
        self._write_lock: asyncio.Lock | None = None

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.super_users = parse_super_users(str(configs.get("super.users") or ""))
        allow = str(configs.get("allow.everyone.if.no.acl.found", "false")).strip().lower()
        if allow not in ("true", "false"):
            raise ConfigError(f"invalid value {allow!r} for allow.everyone.if.no.acl.found (true or false)")
        self.allow_if_no_acl = allow == "true"

    # --- the seam the broker calls (kafkapy.server.auth.StoreBackedAuthorizer) ------------------

    async def attach(self, store: MetadataStore, loop: asyncio.AbstractEventLoop) -> None:
        """Load every ACL and follow the store's changes (before the broker serves)."""
        self._store = store
        self._write_lock = asyncio.Lock()
        self._reloads = Reloader(loop, self._reload, "ACLs")
        self._watch = await asyncio.to_thread(store.watch_acl_changes, self._changed)
        self._replace_all(await asyncio.to_thread(store.acls))

    async def detach(self) -> None:
        await self.settled()
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._reloads is not None:
            self._reloads.close()

    async def settled(self) -> None:
        """Until no reload of changed ACLs runs or is owed (an orderly stop, and tests)."""
        if self._reloads is not None:
            await self._reloads.idle()

    # --- authorize (the hot path) --------------------------------------------------------------

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        question = (principal, client_address, operation, resource_type, resource_name)
        decided = self._decisions.get(question)
        if decided is None:
            decided = self._decide(principal, client_address, operation, resource_type, resource_name)
            if len(self._decisions) >= DECISION_CACHE_SIZE:
                self._decisions = {}
            self._decisions[question] = decided
        return decided

    def _decide(self, principal: str, client_address: str, operation: str, resource_type: str,
                resource_name: str) -> bool:
        if principal in self.super_users:
            return True
        key = (resource_type, resource_name)
        aces = self._matching.get(key)
        if aces is None:
            kind = ResourceType.__members__.get(resource_type)
            aces = self._applying(kind, resource_name) if kind is not None else ()
            if len(self._matching) >= MATCHING_CACHE_SIZE:
                self._matching = {}
            self._matching[key] = aces
        if not aces:
            return self.allow_if_no_acl
        wanted = AclOperation.__members__.get(operation)
        if wanted is None:
            return False
        host = _host(client_address)
        allowed = False
        for ace in aces:
            if ace.principal != principal and ace.principal != WILDCARD_PRINCIPAL:
                continue
            if ace.host != WILDCARD and ace.host != host:
                continue
            if ace.permission == AclPermissionType.DENY:
                if ace.operation == wanted or ace.operation == AclOperation.ALL:
                    return False
            elif not allowed:
                allowed = (ace.operation == wanted or ace.operation == AclOperation.ALL
                           or (wanted == AclOperation.DESCRIBE and ace.operation in IMPLIES_DESCRIBE)
                           or (wanted == AclOperation.DESCRIBE_CONFIGS
                               and ace.operation in IMPLIES_DESCRIBE_CONFIGS))
        return allowed

    def authorize_any(self, principal: str, client_address: str, operation: str, resource_type: str) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do ``operation`` on some
        resource of the type? Yes for a super user (or what a resource without ACLs allows); no
        with a DENY on the LITERAL wildcard; else yes when some ALLOW (LITERAL wildcard, a LITERAL
        name not denied as such, or a name no denied prefix dominates) is left."""
        if self.authorize(principal, client_address, operation, resource_type, "hardcode"):
            return True  # Kafka checks this very name first
        kind = ResourceType.__members__.get(resource_type)
        wanted = AclOperation.__members__.get(operation)
        if kind is None or wanted is None:
            return False
        host = _host(client_address)
        denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allowed: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allowed = False
        for pattern, aces in self._acls.items():
            if pattern.resource_type != kind:
                continue
            for ace in aces:
                if ace.host not in (WILDCARD, host) or ace.principal not in (principal, WILDCARD_PRINCIPAL):
                    continue
                if ace.operation not in (wanted, AclOperation.ALL):
                    continue
                if ace.permission == AclPermissionType.DENY:
                    if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD:
                        return False
                    denied[pattern.pattern_type].add(pattern.name)
                elif pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD:
                    wildcard_allowed = True
                else:
                    allowed[pattern.pattern_type].add(pattern.name)
        if wildcard_allowed:
            return True
        for pattern_type, names in allowed.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                    continue
                if not any(name[:end] in denied[PatternType.PREFIXED] for end in range(1, len(name) + 1)):
                    return True
        return False

    def _applying(self, resource_type: ResourceType, name: str) -> tuple[Ace, ...]:
        found: list[Ace] = [*self._literal.get((resource_type, name), ()),
                            *self._literal.get((resource_type, WILDCARD), ())]
        for prefix, aces in self._prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                found.extend(aces)
        return tuple(found)

    # --- reading (DescribeAcls) ----------------------------------------------------------------

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings ``acl_filter`` matches, in a stable order."""
        found = []
        for pattern, aces in self._acls.items():
            if not acl_filter.matches_pattern(pattern):
                continue
            for ace in aces:
                binding = AclBinding(pattern, ace.principal, ace.host, ace.operation, ace.permission)
                if acl_filter.matches(binding):
                    found.append(binding)
        return sorted(found, key=_binding_order)

    # --- writing (CreateAcls, DeleteAcls) ------------------------------------------------------

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        """Per binding: None once stored, or why not (InvalidAcl, StoreError)."""
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            try:
                binding.validate()
                _storable(binding.pattern)
            except InvalidAcl as exc:
                results[index] = exc
                continue
            by_pattern.setdefault(binding.pattern, []).append(index)
        async with self._writing():
            for pattern, indexes in by_pattern.items():
                added = frozenset(Ace(bindings[i].principal, bindings[i].host, bindings[i].operation,
                                      bindings[i].permission) for i in indexes)
                try:
                    await self._update(pattern, lambda current, added=added: current | added)
                except StoreError as exc:
                    for i in indexes:
                        results[i] = exc
        return results

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding] | Exception]:
        """Per filter: the bindings it deleted, or why it could not (InvalidAcl, StoreError)."""
        results: list[list[AclBinding] | Exception] = [[] for _ in filters]
        valid: list[int] = []
        for index, acl_filter in enumerate(filters):
            try:
                acl_filter.validate()
                valid.append(index)
            except InvalidAcl as exc:
                results[index] = exc
        async with self._writing():
            patterns = {p for p in self._acls if any(filters[i].matches_pattern(p) for i in valid)}
            for i in valid:  # a resource named exactly, which this broker may not have heard of yet
                f = filters[i]
                concrete = f.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
                if f.resource_type != ResourceType.ANY and f.name is not None and concrete:
                    named = ResourcePattern(f.resource_type, f.name, f.pattern_type)
                    with contextlib.suppress(InvalidAcl):  # a name no node can have has no ACLs
                        _storable(named)
                        patterns.add(named)
            for pattern in sorted(patterns, key=lambda p: (p.resource_type, p.pattern_type, p.name)):
                deleted: dict[int, list[AclBinding]] = {}

                def remove(current: frozenset[Ace], pattern: ResourcePattern = pattern,
                           deleted: dict[int, list[AclBinding]] = deleted) -> frozenset[Ace]:
                    deleted.clear()  # a retried compare-and-set starts over
                    kept = set()
                    for ace in current:
                        binding = AclBinding(pattern, ace.principal, ace.host, ace.operation, ace.permission)
                        matched = [i for i in valid if filters[i].matches(binding)]
                        for i in matched:
                            deleted.setdefault(i, []).append(binding)
                        if not matched:
                            kept.add(ace)
                    return frozenset(kept)

                try:
                    await self._update(pattern, remove)
                except StoreError as exc:
                    for i in valid:
                        if filters[i].matches_pattern(pattern):
                            results[i] = exc
                    continue
                for i, bindings in deleted.items():
                    result = results[i]
                    if isinstance(result, list):
                        result.extend(bindings)
        for result in results:
            if isinstance(result, list):
                result.sort(key=_binding_order)
        return results

    def _writing(self) -> asyncio.Lock:
        if self._write_lock is None or self._store is None:
            raise StoreError("the ACL authorizer is not attached to a metadata store")
        return self._write_lock

    async def _update(self, pattern: ResourcePattern, change: Any) -> None:
        """Apply ``change`` (current ACEs -> new ACEs) to the stored ACLs of ``pattern``, retrying
        on a conflicting write; then this broker's memory."""
        store = self._store
        assert store is not None
        resource = _resource(pattern)

        def write() -> frozenset[Ace]:
            for _ in range(WRITE_ATTEMPTS):
                stored, version = store.resource_acls(resource)
                current = frozenset(a for a in map(_ace, stored) if a is not None)
                new = frozenset(change(current))
                if new == current:
                    return current
                try:
                    store.set_resource_acls(resource, frozenset(a.stored() for a in new), version)
                except AclVersionConflict:
                    continue
                return new
            raise StoreError(f"the ACLs of {resource} kept changing under {WRITE_ATTEMPTS} writes")

        self._set(pattern, await asyncio.to_thread(write))

    # --- keeping the memory current ------------------------------------------------------------

    def _changed(self, resource: AclResource) -> None:
        """A store watch callback (any thread): read the resource again on the loop."""
        with self._dirty_lock:
            self._dirty.add(resource)
        if self._reloads is not None:
            self._reloads.request()

    async def _reload(self) -> None:
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        store = self._store
        if not dirty or store is None:
            return

        def read() -> list[tuple[AclResource, frozenset[StoredAcl]]]:
            return [(resource, store.resource_acls(resource)[0]) for resource in dirty]

        try:
            fresh = await asyncio.to_thread(read)
        except BaseException:
            with self._dirty_lock:
                self._dirty |= dirty  # read again on the next run
            raise
        for resource, stored in fresh:
            pattern = _pattern(resource)
            if pattern is not None:
                self._set(pattern, frozenset(a for a in map(_ace, stored) if a is not None))

    def _replace_all(self, stored: Mapping[AclResource, frozenset[StoredAcl]]) -> None:
        acls: dict[ResourcePattern, frozenset[Ace]] = {}
        for resource, entries in stored.items():
            pattern = _pattern(resource)
            if pattern is None:
                log.warning("ignoring the ACLs of %s: unknown resource or pattern type", resource)
                continue
            aces = frozenset(a for a in map(_ace, entries) if a is not None)
            if aces:
                acls[pattern] = aces
        self._acls = acls
        self._rebuild()

    def _set(self, pattern: ResourcePattern, aces: frozenset[Ace]) -> None:
        acls = dict(self._acls)
        if aces:
            acls[pattern] = aces
        else:
            acls.pop(pattern, None)
        self._acls = acls
        self._rebuild()

    def _rebuild(self) -> None:
        """The lookup tables from ``_acls``; whole values replaced, so a reader never sees a half."""
        literal: dict[tuple[ResourceType, str], frozenset[Ace]] = {}
        prefixed: dict[ResourceType, dict[str, frozenset[Ace]]] = {}
        for pattern, aces in self._acls.items():
            if pattern.pattern_type == PatternType.LITERAL:
                literal[(pattern.resource_type, pattern.name)] = aces
            else:
                prefixed.setdefault(pattern.resource_type, {})[pattern.name] = aces
        self._literal, self._prefixed = literal, prefixed
        self._matching = {}
        self._decisions = {}


def _binding_order(binding: AclBinding) -> tuple[Any, ...]:
    p = binding.pattern
    return (p.resource_type, p.pattern_type, p.name, binding.principal, binding.host, binding.operation,
            binding.permission)


def bindings_of(acls: Iterable[AclBinding]) -> dict[ResourcePattern, list[AclBinding]]:
    """Bindings grouped by resource pattern (DescribeAcls answers them so), in order."""
    grouped: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in acls:
        grouped.setdefault(binding.pattern, []).append(binding)
    return grouped
