"""The features module: finalized-feature cache, broker protections, UpdateFeatures/DeleteFeatures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkapy.errors import ErrorCode, KafkaPyError
from kafkapy.features.rules import (
    SAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
    incompatibilities,
    plan_deletes,
    plan_updates,
)
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.server.services import FINALIZED_FEATURES
from kafkapy.store.base import BrokerRegistration, FeatureEpochConflict, StoreError, Watch

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.services import BrokerServices

__all__ = ["FeatureIncompatible", "FeaturesModule"]

log = logging.getLogger(__name__)



_ATTEMPTS = 5  # writes retried when another writer moved the epoch meanwhile


class FeatureIncompatible(KafkaPyError):
    """The broker cannot run at the cluster's finalized feature levels (KIP-584's broker protection)."""


class FeaturesModule(Module):
    name = "features"
    # The broker takes it from here: nothing is finalized (gated APIs stay closed) until start()
    # reads the finalized state and hands it over with set_finalized_features.
    provides = (FINALIZED_FEATURES,)

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._watch: Watch | None = None
        self._taken = False  # whether a finalized state was read yet
        self._lock = asyncio.Lock()  # one update at a time on the controller

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.UPDATE_FEATURES: ApiHandler(VersionRange(0, 2), self.update_features),
            ApiKey.DELETE_FEATURES: ApiHandler(VersionRange(0, 0), self.delete_features),
        }

    # --- defaults, startup protection and the watch --------------------------------------------

    def default_levels(self) -> dict[str, int]:
        """The level each supported feature is finalized at on a fresh cluster: a module's
        ``default_feature_levels`` entry, else the highest level supported (after the caps)."""
        supported = self.services.supported_features
        levels = {name: high for name, (_, high) in supported.items() if high >= 1}
        for name, level in self.services.default_feature_levels().items():
            if name in supported:
                low, high = supported[name]
                if level < 1:
                    levels.pop(name, None)
                else:
                    levels[name] = max(low, min(level, high))
        return levels

    async def start(self) -> None:
        runtime = self.services
        store = runtime.store
        epoch, finalized = await asyncio.to_thread(store.finalized_features)
        if epoch < 0 and runtime.config["features.finalize.on.start"]:
            defaults = self.default_levels()
            try:
                epoch = await asyncio.to_thread(store.set_finalized_features, defaults, -1)
                finalized = defaults
                log.info("finalized the features of a fresh cluster at epoch %d: %s", epoch,
                         _describe(defaults))
            except FeatureEpochConflict:  # another broker finalized them first
                epoch, finalized = await asyncio.to_thread(store.finalized_features)
        problems = incompatibilities(runtime.supported_features, finalized)
        if problems:
            raise FeatureIncompatible(
                f"broker {runtime.broker_id} refuses to start: {'; '.join(problems)} (finalized features "
                f"epoch {epoch}; see supported.features.max and kafkapy features describe)")
        self._apply(epoch, finalized)
        self._watch = await asyncio.to_thread(store.watch_features, self._features_changed)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _features_changed(self, epoch: int, features: dict[str, int]) -> None:
        """Store watch callback, on any thread."""
        try:
            self.services.loop.call_soon_threadsafe(self._apply, epoch, features)
        except RuntimeError:  # the loop is closed: the broker is gone
            pass

    def _apply(self, epoch: int, features: Mapping[str, int]) -> None:
        """Take a finalized state if it is newer (the higher epoch wins), then reopen or close the
        gates; a state this broker cannot run with shuts it down. Epoch -1 (nothing stored any
        more) clears the state, so that a recreated /feature (epoch 0 again) is taken."""
        runtime = self.services
        if self._taken and epoch < 0 <= runtime.finalized_epoch:
            # The finalized state is gone from the store (the /feature znode deleted): forget it,
            # as Kafka's feature cache does, and take whatever is finalized anew from epoch 0 on.
            runtime.set_finalized_features(-1, {})
            log.warning("the finalized features are gone from the metadata store: none finalized now")
            return
        if self._taken and epoch <= runtime.finalized_epoch:
            return
        problems = incompatibilities(runtime.supported_features, features)
        if problems and self._taken:
            # Never serve at levels this broker cannot run: keep the old gates while stopping.
            runtime.fail(f"incompatible finalized features at epoch {epoch}: {'; '.join(problems)}")
            return
        self._taken = True
        runtime.set_finalized_features(epoch, features)  # gates and ApiVersions follow
        log.info("finalized features at epoch %d: %s", epoch, _describe(features))

    # --- UpdateFeatures (57) and DeleteFeatures (1020) -----------------------------------------

    def _refusal(self, ctx: RequestContext) -> tuple[int, str] | None:
        """Who may change finalized features: ALTER on the cluster, and only the controller."""
        conn = ctx.connection
        if not self.services.authorizer.authorize(conn.principal, conn.client_address[0], "ALTER", "CLUSTER",
                                               CLUSTER_RESOURCE):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{conn.principal} may not ALTER the cluster"
        controller = self.services.cluster.controller_id
        if controller != self.services.broker_id:
            return ErrorCode.NOT_CONTROLLER, (f"broker {self.services.broker_id} is not the controller "
                                    f"(the controller is broker {controller})")
        return None

    async def update_features(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        updates = []
        for item in body["feature_updates"]:
            if ctx.api_version == 0:
                kind = SAFE_DOWNGRADE if item.get("allow_downgrade") else UPGRADE
            else:
                kind = item.get("upgrade_type", UPGRADE)
            updates.append(FeatureUpdate(item["feature"], item["max_version_level"], kind))
        names = [u.feature for u in updates]

        def answer(code: int, message: str | None) -> dict[str, Any]:
            response: dict[str, Any] = {"throttle_time_ms": 0, "error_code": code, "error_message": message}
            # v2 dropped the per-feature results. v0-1 list each feature only on success: a
            # failure is all or nothing, so Kafka's controller says it once, at the top level.
            if ctx.api_version < 2:
                response["results"] = [] if code != ErrorCode.NONE else [
                    {"feature": name, "error_code": code, "error_message": message}
                    for name in dict.fromkeys(names)]
            return response

        refused = self._refusal(ctx)
        if refused is not None:
            return answer(*refused)
        if not updates:
            return answer(ErrorCode.INVALID_REQUEST, "The request has no feature updates.")
        validate_only = bool(body.get("validate_only", False))
        code, message = await self._change(
            lambda finalized, brokers: plan_updates(finalized, brokers, updates), validate_only)
        return answer(code, message)

    async def delete_features(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        names: list[str] = list(request.body["feature_names"] or [])
        refused = self._refusal(ctx)
        if refused is not None:
            return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1],
                    "results": [{"feature": n, "error_code": refused[0], "error_message": refused[1]}
                                for n in names]}
        errors: dict[str, str] = {}

        def plan(finalized: Mapping[str, int], _: Sequence[BrokerRegistration]
                 ) -> tuple[dict[str, int], dict[str, str]]:
            result, found = plan_deletes(finalized, names)
            errors.clear()
            errors.update(found)
            return result, found

        code, message = await self._change(plan, False)
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "results": [{"feature": n, "error_code": code, "error_message": errors.get(n, message)}
                            for n in names]}

    async def _change(self, plan: Callable[[Mapping[str, int], Sequence[BrokerRegistration]],
                                           tuple[dict[str, int], dict[str, str]]],
                      validate_only: bool) -> tuple[int, str | None]:
        """Validate against the store's current state and every live broker, then write all or
        nothing (compare-and-set on the epoch, retried if another writer got in between)."""
        store = self.services.store
        async with self._lock:
            try:
                for _ in range(_ATTEMPTS):
                    epoch, finalized = await asyncio.to_thread(store.finalized_features)
                    brokers = await asyncio.to_thread(store.brokers)
                    wanted, errors = plan(finalized, brokers)
                    if errors:
                        return ErrorCode.INVALID_UPDATE_VERSION, " ".join(errors.values())
                    if validate_only or wanted == finalized:
                        return ErrorCode.NONE, None
                    try:
                        new_epoch = await asyncio.to_thread(store.set_finalized_features, wanted, epoch)
                    except FeatureEpochConflict:
                        continue
                    log.info("finalized features changed to epoch %d: %s", new_epoch, _describe(wanted))
                    self._apply(new_epoch, wanted)
                    return ErrorCode.NONE, None
            except StoreError as exc:
                return ErrorCode.FEATURE_UPDATE_FAILED, f"the metadata store failed: {exc}"
        return ErrorCode.FEATURE_UPDATE_FAILED, "the finalized features kept changing meanwhile; try again"


def _describe(features: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={level}" for name, level in sorted(features.items())) or "(none)"
