"""SCRAM credentials: kept where Kafka keeps them, managed with Kafka's APIs, looked up in memory.

Each user's credentials live in the metadata store's ``users/<user>`` entity config (ZooKeeper
``/config/users/<user>``, beside the user's quotas), one key per mechanism, in ScramCredentialUtils'
form (kafkapy.server.sasl.scram). AlterUserScramCredentials (51) and DescribeUserScramCredentials (50)
write and read them with Kafka's validation and error codes. Authentication must not wait for the
store (a SASL exchange is answered inside the read that brought it), so the module keeps every
credential in memory: loaded at start, updated by its own writes at once, and by the store's change
notifications for writes made through other brokers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafkapy.errors import ErrorCode
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.server.sasl.scram import (
    MECHANISMS,
    MECHANISMS_BY_CODE,
    ScramCredential,
    credential_from_salted_password,
    parse_credential,
)
from kafkapy.store.base import Watch, desanitize, sanitize
from kafkapy.store.onloop import call_soon_on

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["SCRAM_CREDENTIALS", "ScramCredentialsModule"]

SCRAM_CREDENTIALS = "scram-credentials"  # the capability: ScramCredentialsModule.lookup
USERS = "users/"
# Kafka's messages
DUPLICATE_ALTERATION = "A user credential cannot be altered twice in the same request"
DUPLICATE_DESCRIPTION = "Cannot describe SCRAM credentials for the same user twice in a single request"
NOT_FOUND_DESCRIPTION = "Attempt to describe a user credential that does not exist"
NOT_FOUND_DELETION = "Attempt to delete a user credential that does not exist"


class ScramCredentialsModule(Module):
    name = "scram"
    provides = (SCRAM_CREDENTIALS,)

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._credentials: dict[str, dict[str, ScramCredential]] = {}  # user -> mechanism -> credential
        self._watch: Watch | None = None
        self._reloads: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ApiHandler(VersionRange(0, 0), self.describe),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ApiHandler(VersionRange(0, 0), self.alter),
        }

    # --- the in-memory copy -----------------------------------------------------------------

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    @staticmethod
    def _parse(config: Mapping[str, str]) -> dict[str, ScramCredential]:
        found = {}
        for mechanism in MECHANISMS:
            credential = parse_credential(config[mechanism]) if mechanism in config else None
            if credential is not None:
                found[mechanism] = credential
        return found

    def _set(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        if credentials:
            self._credentials[user] = credentials
        else:
            self._credentials.pop(user, None)

    async def start(self) -> None:
        store = self.services.store
        self._watch = await asyncio.to_thread(store.watch_entity_configs, self._entity_changed)
        for path, config in (await asyncio.to_thread(store.entity_configs, "users")).items():
            self._set(desanitize(path[len(USERS):]), self._parse(config))

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        reloads = list(self._reloads)
        for task in reloads:
            task.cancel()
        await asyncio.gather(*reloads, return_exceptions=True)

    def _entity_changed(self, path: str) -> None:
        """On a store thread: a user entity changed (perhaps through another broker)."""
        if path.startswith(USERS) and path.count("/") == 1:
            call_soon_on(self.services.loop, self._reload_soon, path)  # nothing once the loop closed

    def _reload_soon(self, path: str) -> None:
        if self._watch is None:  # stopped meanwhile
            return
        task = self.services.loop.create_task(self._reload(path))
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def _reload(self, path: str) -> None:
        config = await asyncio.to_thread(self.services.store.entity_config, path)
        self._set(desanitize(path[len(USERS):]), self._parse(config))

    # --- DescribeUserScramCredentials ---------------------------------------------------------

    def _allowed(self, ctx: RequestContext, operation: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  "CLUSTER", CLUSTER_RESOURCE)

    def describe(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        if not self._allowed(ctx, "DESCRIBE"):  # Kafka's getErrorResponse: one nameless result per name
            refused = {"user": "", "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                       "error_message": None, "credential_infos": []}
            return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": None, "results": [refused for _ in request.body.get("users") or []]}
        asked = [u["name"] for u in request.body.get("users") or []]
        described = asked or sorted(self._credentials)  # none named: every user that has one
        counts = {user: asked.count(user) for user in asked}
        results = []
        for user in dict.fromkeys(described):
            credentials = self._credentials.get(user, {})
            if counts.get(user, 1) > 1:  # Kafka's messages end with the user's name
                error, message = ErrorCode.DUPLICATE_RESOURCE, f"{DUPLICATE_DESCRIPTION}: {user}"
            elif not credentials:
                error, message = ErrorCode.RESOURCE_NOT_FOUND, f"{NOT_FOUND_DESCRIPTION}: {user}"
            else:
                error, message = ErrorCode.NONE, None
            results.append({"user": user, "error_code": error, "error_message": message, "credential_infos": [
                {"mechanism": MECHANISMS[m].code, "iterations": c.iterations}
                for m, c in sorted(credentials.items())] if error == ErrorCode.NONE else []})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "results": results}

    # --- AlterUserScramCredentials ------------------------------------------------------------

    @staticmethod
    def _problem(alteration: Mapping[str, Any], upsert: bool) -> tuple[ErrorCode, str] | None:
        """What is wrong with one deletion or upsertion on its own, as Kafka checks it."""
        if not alteration.get("name"):
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        mechanism = MECHANISMS_BY_CODE.get(alteration.get("mechanism", 0))
        if mechanism is None:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        if upsert:
            if alteration["iterations"] < mechanism.min_iterations:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            if alteration["iterations"] > mechanism.max_iterations:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            if not alteration.get("salt") or not alteration.get("salted_password"):
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
        return None

    async def alter(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        alterations = [(d, False) for d in body.get("deletions") or []] + \
                      [(u, True) for u in body.get("upsertions") or []]
        users = list(dict.fromkeys(a["name"] for a, _ in alterations))
        if not self._allowed(ctx, "ALTER"):  # Kafka's getErrorResponse: every user named, sorted
            return {"throttle_time_ms": 0, "results": [
                {"user": user, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
                for user in sorted(users)]}
        # Kafka's order (ZkAdminManager.alterUserScramCredentials, ScramControlManager): each
        # alteration's own problem fails its user first (the first one found), then a (user, mechanism)
        # altered twice, then a deletion of what does not exist. One failure fails all of the user's.
        failed: dict[str, tuple[ErrorCode, str]] = {}
        for alteration, upsert in alterations:
            problem = self._problem(alteration, upsert)
            if problem is not None:
                failed.setdefault(alteration["name"], problem)
        keys = [(a["name"], a["mechanism"]) for a, _ in alterations if a["name"] not in failed]
        for user, mechanism in keys:
            if keys.count((user, mechanism)) > 1:
                failed[user] = ErrorCode.DUPLICATE_RESOURCE, DUPLICATE_ALTERATION
        for alteration, upsert in alterations:
            user = alteration["name"]
            if not upsert and user not in failed and \
                    self.lookup(MECHANISMS_BY_CODE[alteration["mechanism"]].name, user) is None:
                failed[user] = ErrorCode.RESOURCE_NOT_FOUND, NOT_FOUND_DELETION
        changes: dict[str, dict[str, ScramCredential]] = {}
        for alteration, upsert in alterations:
            user = alteration["name"]
            if user in failed:
                continue
            credentials = changes.setdefault(user, dict(self._credentials.get(user, {})))
            mechanism = MECHANISMS_BY_CODE[alteration["mechanism"]]
            if upsert:
                credentials[mechanism.name] = credential_from_salted_password(
                    mechanism, bytes(alteration["salt"]), bytes(alteration["salted_password"]),
                    alteration["iterations"])
            else:
                credentials.pop(mechanism.name, None)
        for user, credentials in changes.items():
            await asyncio.to_thread(self._write, user, credentials)
            self._set(user, credentials)
        return {"throttle_time_ms": 0, "results": [
            {"user": user, "error_code": failed.get(user, (ErrorCode.NONE, None))[0],
             "error_message": failed.get(user, (ErrorCode.NONE, None))[1]} for user in users]}

    def _write(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        """The user's entity with its SCRAM keys replaced; its other keys (quotas) kept."""
        store = self.services.store
        path = f"{USERS}{sanitize(user)}"
        config = {k: v for k, v in store.entity_config(path).items() if k not in MECHANISMS}
        config.update({mechanism: credential.to_kafka() for mechanism, credential in credentials.items()})
        store.set_entity_config(path, config)
