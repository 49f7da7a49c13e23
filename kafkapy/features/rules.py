"""KIP-584's rules, as pure functions: what an update may change, and what a broker can run with.

Kept apart from the module so that they can be read (and tested) without a broker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from kafkapy.store.base import BrokerRegistration

__all__ = [
    "SAFE_DOWNGRADE",
    "UNSAFE_DOWNGRADE",
    "UPGRADE",
    "FeatureUpdate",
    "incompatibilities",
    "plan_deletes",
    "plan_updates",
]

# UpdateFeatures v1+ UpgradeType; v0's AllowDowngrade=true reads as SAFE_DOWNGRADE.
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3
UPGRADE_TYPES = {UPGRADE: "upgrade", SAFE_DOWNGRADE: "safe downgrade", UNSAFE_DOWNGRADE: "unsafe downgrade"}


@attrs.frozen
class FeatureUpdate:
    feature: str
    level: int  # 0: delete the finalized feature (needs a downgrade type); < 0: invalid
    upgrade_type: int = UPGRADE


def _invalid(update: FeatureUpdate, reason: str) -> str:
    # Kafka's wording (FeatureControlManager.invalidUpdateVersion).
    return f"Invalid update version {update.level} for feature {update.feature}. {reason}"


def plan_updates(finalized: Mapping[str, int], brokers: Sequence[BrokerRegistration],
                 updates: Sequence[FeatureUpdate]) -> tuple[dict[str, int], dict[str, str]]:
    """The finalized features after ``updates``, and the reason each invalid update is invalid
    (empty when all are valid: the caller applies all or nothing).

    Every live broker must support the new level; lowering a level, or deleting a feature with
    level 0, needs a downgrade type, and a downgrade type may not raise a level (as Kafka's
    controller rules); a negative level is invalid; setting the current level again is valid and
    changes nothing, and so is level 0 of a feature that is not finalized, if some broker knows it
    (a feature no broker knows is invalid at every level, 0 too, as Kafka's KRaft controller has it).
    """
    result = dict(finalized)
    errors: dict[str, str] = {}
    seen: set[str] = set()

    def refuse(update: FeatureUpdate, reason: str) -> None:
        text = _invalid(update, reason)
        errors[update.feature] = f"{errors[update.feature]} {text}" if update.feature in errors else text

    for update in updates:
        name = update.feature
        if name in seen:
            refuse(update, "The feature appears more than once in the request.")
            continue
        seen.add(name)
        if not name:
            refuse(update, "The feature name is empty.")
            continue
        if update.upgrade_type not in UPGRADE_TYPES:
            refuse(update, f"Unknown upgrade type {update.upgrade_type} "
                           f"(1 upgrade, 2 safe downgrade, 3 unsafe downgrade).")
            continue
        downgrade = update.upgrade_type != UPGRADE
        current = finalized.get(name, 0)
        if update.level < 0:
            # Level 0 is "not finalized"; below it there is nothing (Kafka refuses it too).
            refuse(update, "A feature level can't be negative: 0 deletes the finalized feature.")
            continue
        if update.level > current and downgrade:
            refuse(update, f"A downgrade type can't raise the level: the finalized level is {current}.")
            continue
        if update.level == 0:
            if current == 0:
                if not any(name in b.features for b in brokers):
                    # Kafka's controller knows no such feature at any level (Features.featureFromName)
                    refuse(update, "The feature is unknown: no live broker supports it.")
                # else not finalized, and asked to stay so: valid, changes nothing
                continue
            if not downgrade:
                refuse(update, "Deleting a finalized feature (level 0) needs a "
                               "downgrade type (AllowDowngrade in v0).")
            else:
                result.pop(name, None)
            continue
        if update.level < current and not downgrade:
            refuse(update, f"Can't downgrade from the finalized level {current} without setting "
                           f"the upgrade type to safe or unsafe downgrade (AllowDowngrade in v0).")
            continue
        if update.level != current:
            problem = _unsupported_by(brokers, name, update.level)
            if problem:
                refuse(update, problem)
                continue
        result[name] = update.level
    return result, errors


def _unsupported_by(brokers: Sequence[BrokerRegistration], name: str, level: int) -> str | None:
    if not any(name in b.features for b in brokers):
        return "The feature is unknown: no live broker supports it."
    for broker in sorted(brokers, key=lambda b: b.broker_id):
        supported = broker.features.get(name)
        if supported is None:
            return f"Broker {broker.broker_id} does not support the feature."
        low, high = supported
        if level > high:
            return f"The level is beyond broker {broker.broker_id}'s maximum {high}."
        if level < low:
            return f"The level is below broker {broker.broker_id}'s minimum {low}."
    return None


def plan_deletes(finalized: Mapping[str, int], names: Sequence[str]) -> tuple[dict[str, int], dict[str, str]]:
    """DeleteFeatures (seed 004): every named feature must be finalized, or nothing is deleted."""
    result = dict(finalized)
    errors: dict[str, str] = {}
    for name in names:
        if name not in finalized:
            errors[name] = f"Can not delete feature {name!r}: it is not finalized."
        else:
            result.pop(name, None)
    return result, errors


def incompatibilities(supported: Mapping[str, tuple[int, int]], finalized: Mapping[str, int]) -> list[str]:
    """Why a broker supporting ``supported`` cannot run with ``finalized`` (empty if it can)."""
    problems = []
    for name, level in sorted(finalized.items()):
        if level < 1:
            continue
        found = supported.get(name)
        if found is None:
            problems.append(f"feature {name} is finalized at level {level}, which this broker does not "
                            f"support at all")
        elif not found[0] <= level <= found[1]:
            problems.append(f"feature {name} is finalized at level {level}, outside the levels "
                            f"{found[0]}..{found[1]} this broker supports")
    return problems
