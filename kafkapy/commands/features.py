"""``kafkapy features``: describe and change finalized features (KIP-584), like kafka-features.sh.

``describe`` reads ApiVersions v3's feature fields from the bootstrap broker; ``upgrade``,
``downgrade`` and ``disable`` send UpdateFeatures (57) and ``delete`` the seed's DeleteFeatures
(1020), both to the controller, found through Metadata.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import kafkapy
from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._controller import controller_client
from kafkapy.commands._numbers import java_short
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.errors import ErrorCode
from kafkapy.features.rules import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["register"]



def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "features", help="describe and change finalized features (KIP-584), like kafka-features.sh",
        description="Describe the supported and finalized features, or change the finalized ones "
                    "through the controller (UpdateFeatures; delete uses DeleteFeatures, api key 1020).")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="connect and read timeout (default 10)")
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("describe", help="supported and finalized features of the broker asked")
    upgrade = actions.add_parser("upgrade", help="raise a feature's finalized level")
    downgrade = actions.add_parser("downgrade", help="lower a feature's finalized level")
    for sub in (upgrade, downgrade):
        sub.add_argument("--feature", required=True, metavar="FEATURE",
                         help="the feature (FEATURE=LEVEL also works, without --version)")
        sub.add_argument("--version", type=java_short, metavar="LEVEL", help="the new finalized level")
        sub.add_argument("--dry-run", action="store_true", help="validate only; change nothing")
    downgrade.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
    disable = actions.add_parser("disable", help="remove a finalized feature (a downgrade to level 0)")
    disable.add_argument("--feature", required=True, metavar="FEATURE")
    disable.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
    disable.add_argument("--dry-run", action="store_true", help="validate only; change nothing")
    delete = actions.add_parser("delete", help="delete a finalized feature (DeleteFeatures, api key 1020)")
    delete.add_argument("--feature", required=True, metavar="FEATURE", action="append",
                        help="a feature to delete (repeatable: all or nothing)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "describe":
            return _describe(args)
        if args.action == "delete":
            return _delete(args)
        return _update(args)
    except ClientError as exc:
        print(f"kafkapy features: {exc}", file=sys.stderr)
        return 1


def _describe(args: argparse.Namespace) -> int:
    with SimpleClient(args.bootstrap_server, args.timeout, **client_options(args)) as client:
        body = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "kafkapy-features",
                                                "client_software_version": kafkapy.__version__})
    if body["error_code"]:
        raise ClientError(f"ApiVersions failed with error {body['error_code']}")
    epoch = body.get("finalized_features_epoch", -1)
    finalized = {f["name"]: f["max_version_level"] for f in body.get("finalized_features") or []}
    supported = {f["name"]: (f["min_version"], f["max_version"])
                 for f in body.get("supported_features") or []}
    for name in sorted(set(supported) | set(finalized)):
        low, high = supported.get(name, ("-", "-"))
        level = finalized.get(name, "-")
        print(f"Feature: {name}\tSupportedMinVersion: {low}\tSupportedMaxVersion: {high}\t"
              f"FinalizedVersionLevel: {level}\tEpoch: {epoch if epoch >= 0 else '-'}")
    if not supported and not finalized:
        print("no features")
    return 0


def _controller(args: argparse.Namespace) -> SimpleClient:
    return controller_client(args, "kafkapy-features")


def _error(code: int, message: str | None) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message}" if message else name


def _update(args: argparse.Namespace) -> int:
    feature, level = args.feature, getattr(args, "version", None)
    if args.action == "disable":
        level = 0
    elif level is None:
        name, sep, text = feature.partition("=")
        try:
            level = java_short(text) if sep else None
        except argparse.ArgumentTypeError as exc:
            raise ClientError(f"{args.action} --feature {feature}: the level {exc}") from None
        if level is None:
            raise ClientError(f"{args.action} needs --version LEVEL (or --feature FEATURE=LEVEL)")
        feature = name
    if args.action == "upgrade":
        kind, verb = UPGRADE, "upgraded"
    else:
        kind = UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE
        verb = "disabled" if args.action == "disable" else "downgraded"
    with _controller(args) as client:
        body = client.request(ApiKey.UPDATE_FEATURES, 1, {
            "feature_updates": [{"feature": feature, "max_version_level": level, "upgrade_type": kind}],
            "validate_only": bool(args.dry_run)})
    results = {r["feature"]: r for r in body.get("results") or []}
    result = results.get(feature, body)
    code = body["error_code"] or result["error_code"]
    message = body["error_message"] if body["error_code"] else result["error_message"]
    target = "" if args.action == "disable" else f" to {level}"
    if code:
        print(f"Could not {args.action} {feature}. {_error(code, message)}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(f"{feature} can be {verb}{target}.")
    else:
        print(f"{feature} was {verb}{target}.")
    return 0


def _delete(args: argparse.Namespace) -> int:
    with _controller(args) as client:
        body = client.request(ApiKey.DELETE_FEATURES, 0, {"feature_names": args.feature})
    if body["error_code"]:
        problem = _error(body["error_code"], body["error_message"])
        print(f"Could not delete {', '.join(args.feature)}. {problem}", file=sys.stderr)
        return 1
    for name in args.feature:
        print(f"{name} was deleted.")
    return 0
