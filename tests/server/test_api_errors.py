"""Handlers raise KafkaApiError; dispatch answers with it in the response's top-level error fields."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.modules import ApiHandler, Module, RequestContext

DESCRIBE_ACLS = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                 "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


class Refuses(Module):
    """DescribeAcls refused at once, or after a real wait; DeleteAcls (no top-level error code; a
    key no default module serves)."""

    name = "refuses"

    def apis(self) -> Mapping[int, ApiHandler]:
        return {ApiKey.DESCRIBE_ACLS: ApiHandler(VersionRange(0, 3), self.describe_acls),
                ApiKey.DELETE_ACLS: ApiHandler(VersionRange(0, 0), self.delete_acls)}

    async def describe_acls(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        if ctx.api_version >= 1:
            await asyncio.sleep(0.05)  # refused after suspending: the worker task's path
        raise KafkaApiError(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")

    def delete_acls(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "no top-level error code to say it with")


@pytest.mark.parametrize("version", [0, 1, 3], ids=["in-place", "after-a-wait", "flexible"])
def test_a_raised_kafka_api_error_becomes_the_top_level_error_fields(version: int) -> None:
    with Broker(modules=[Refuses]) as b, KafkaSocket(b.bootstrap_servers) as s:
        asked = {k: v for k, v in DESCRIBE_ACLS.items() if version >= 1 or k != "pattern_type_filter"}
        body = s.call(ApiKey.DESCRIBE_ACLS, version, asked).body
        assert body["error_code"] == ErrorCode.SECURITY_DISABLED
        assert body["error_message"] == "No Authorizer is configured."
        assert body["resources"] == [] and body["throttle_time_ms"] == 0  # the rest: defaults
        # the connection goes on
        assert s.call(ApiKey.API_VERSIONS, 0, {}).body["error_code"] == ErrorCode.NONE


def test_a_kafka_api_error_with_no_top_level_error_field_closes_only_that_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    with Broker(modules=[Refuses]) as b, KafkaSocket(b.bootstrap_servers) as s:
        s.send(ApiKey.DELETE_ACLS, 0, {"filters": []})
        assert s.wait_closed() == b""
        with KafkaSocket(b.bootstrap_servers) as other:
            assert other.call(ApiKey.API_VERSIONS, 0, {}).body["error_code"] == ErrorCode.NONE
    assert any("has no top-level error code" in r.getMessage() and "INVALID_REQUEST" in r.getMessage()
               for r in caplog.records)
