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


class Refuses(Module):
    """DescribeDelegationToken refused at once, or after a real wait; StreamsGroupDescribe (no
    top-level error code). Keys no default module serves."""

    name = "refuses"

    def apis(self) -> Mapping[int, ApiHandler]:
        return {ApiKey.DESCRIBE_DELEGATION_TOKEN: ApiHandler(VersionRange(0, 3), self.describe_tokens),
                ApiKey.STREAMS_GROUP_DESCRIBE: ApiHandler(VersionRange(0, 0), self.describe_streams_groups)}

    async def describe_tokens(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        if ctx.api_version >= 1:
            await asyncio.sleep(0.05)  # refused after suspending: the worker task's path
        raise KafkaApiError(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
                            "Delegation Token feature is not enabled")

    def describe_streams_groups(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "no top-level error code to say it with")


@pytest.mark.parametrize("version", [0, 1, 3], ids=["in-place", "after-a-wait", "flexible"])
def test_a_raised_kafka_api_error_becomes_the_top_level_error_fields(version: int) -> None:
    with Broker(modules=[Refuses]) as b, KafkaSocket(b.bootstrap_servers) as s:
        body = s.call(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, {"owners": None}).body
        assert body["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED  # (the answer has no message)
        assert body["tokens"] == [] and body["throttle_time_ms"] == 0  # the rest: defaults
        # the connection goes on
        assert s.call(ApiKey.API_VERSIONS, 0, {}).body["error_code"] == ErrorCode.NONE


def test_a_kafka_api_error_with_no_top_level_error_field_closes_only_that_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    with Broker(modules=[Refuses]) as b, KafkaSocket(b.bootstrap_servers) as s:
        s.send(ApiKey.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [], "include_authorized_operations": False})
        assert s.wait_closed() == b""
        with KafkaSocket(b.bootstrap_servers) as other:
            assert other.call(ApiKey.API_VERSIONS, 0, {}).body["error_code"] == ErrorCode.NONE
    assert any("has no top-level error code" in r.getMessage() and "INVALID_REQUEST" in r.getMessage()
               for r in caplog.records)
