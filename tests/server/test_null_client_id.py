"""A request header's null client id is the empty one, as Kafka's RequestHeader.parse makes it:
handlers, interceptors and quotas see "", never None."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import ClassVar

import pytest
from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.protocol import Request, decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.interceptors import PASS, Interceptor, Pass
from kafkapy.server.modules import Answer, Module, RequestContext


class Notes(Interceptor):
    def __init__(self) -> None:
        self.client_ids: list[str | None] = []

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        self.client_ids.append(context.client_id)
        return PASS


NOTES = Notes()


class Installs(Module):
    name = "installs-notes"
    interceptors: ClassVar[Sequence[Interceptor]] = (NOTES,)

    async def start(self) -> None:
        self.services.install_interceptor(NOTES)


def _null_client_id(api_key: int, version: int, body: dict[str, object]) -> bytes:
    """The request with its client id ("x") replaced by a null string (length -1)."""
    full = encode_request(api_key, version, 7, "x", body)
    assert full[8:11] == b"\x00\x01x"
    return full[:8] + struct.pack(">h", -1) + full[11:]


@pytest.mark.parametrize("version", [1, 12])  # request header v1, and v2 (flexible)
def test_a_null_client_id_reaches_handlers_as_the_empty_one(version: int) -> None:
    body: dict[str, object] = {"topics": []}
    if version >= 4:
        body.update(allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with Broker(modules=[Installs]) as b, KafkaSocket(b.bootstrap_servers) as conn:
        NOTES.client_ids.clear()
        conn.send_body(_null_client_id(ApiKey.METADATA, version, body))
        response = decode_response(conn.read_frame(), ApiKey.METADATA, version)
        assert response.correlation_id == 7
        assert NOTES.client_ids == [""]
