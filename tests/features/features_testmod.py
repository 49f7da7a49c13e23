"""A test module with an API gated on a test feature (KIP-584 gating), importable by dotted path
(``features_testmod:GatedModule``) from tests and from `kafkapy serve` subprocesses alike.

DescribeQuorum (55) stands in for "some API": no kafkapy module serves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkapy.protocol import Request
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.modules import ApiHandler, Module, RequestContext

TEST_FEATURE = "test.gated"
GATED_KEY = 55


class GatedModule(Module):
    name = "gated-test"
    features = {TEST_FEATURE: (1, 3)}

    def apis(self) -> Mapping[int, ApiHandler]:
        return {GATED_KEY: ApiHandler(VersionRange(0, 0), self.answer, feature=TEST_FEATURE,
                                      min_feature_level=2)}

    async def answer(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        return {"error_code": 0, "topics": []}


class DefaultsModule(Module):
    """Names a default level below its maximum, and a feature supported from level 0."""

    name = "defaults-test"
    features = {"test.defaulted": (1, 5), "test.zero": (0, 2)}
    default_feature_levels = {"test.defaulted": 2}


class DenyAlterCluster:
    """An authorizer that refuses ALTER on the cluster and allows everything else."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        return not (operation == "ALTER" and resource_type == "CLUSTER")
