"""The interceptor seam's two notices: a request the dispatcher answers itself as unsupported is
told to ``unrouted``, and a handler's refusal (a KafkaApiError, which no ``after`` sees) to
``refused``. Neither changes the answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from server_wire import CLIENT_ID, KafkaSocket, raw_header

from kafkapy import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.interceptors import Interceptor
from kafkapy.server.modules import Answer, Module, RequestContext


class Notices(Interceptor):
    def __init__(self) -> None:
        self.unrouted_seen: list[tuple[int, int, int, str | None]] = []
        self.refused_seen: list[tuple[int, int, ErrorCode]] = []
        self.after_seen: list[int] = []

    def unrouted(self, context: RequestContext) -> None:
        self.unrouted_seen.append((context.api_key, context.api_version, context.correlation_id,
                                   context.client_id))

    def refused(self, context: RequestContext, request: Request, refusal: KafkaApiError) -> None:
        self.refused_seen.append((context.api_key, context.correlation_id, refusal.code))

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        self.after_seen.append(context.correlation_id)
        return answer


def broker_with(notices: Notices) -> Broker:
    class Installs(Module):
        name = "installs-notices"
        chain: ClassVar[Sequence[Interceptor]] = (notices,)

        async def start(self) -> None:
            for interceptor in self.chain:
                self.services.install_interceptor(interceptor)

    return Broker(modules=[Installs])


def test_unrouted_requests_are_told_and_still_get_the_dispatchers_answer() -> None:
    notices = Notices()
    with broker_with(notices) as broker, KafkaSocket(broker.bootstrap_servers) as sock:
        sock.send_body(raw_header(ApiKey.METADATA, 99, 41, b"\x00"))  # flexible: header v2
        assert sock.read_frame() == (41).to_bytes(4, "big")  # the KIP-35 empty answer, as without it
        sock.send_body(raw_header(9999, 0, 42))
        assert sock.read_frame() == (42).to_bytes(4, "big")
    assert notices.unrouted_seen == [(ApiKey.METADATA, 99, 41, CLIENT_ID), (9999, 0, 42, CLIENT_ID)]
    assert notices.after_seen == []


def test_a_handlers_refusal_is_told_and_answered_as_before() -> None:
    notices = Notices()
    with broker_with(notices) as broker, KafkaSocket(broker.bootstrap_servers) as sock:
        answer = sock.call(ApiKey.HEARTBEAT, 4, {"group_id": "nobody", "generation_id": 1, "member_id": "m",
                                                  "group_instance_id": None})
        code = answer.body["error_code"]
        assert code != ErrorCode.NONE
        sock.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert notices.refused_seen == [(ApiKey.HEARTBEAT, answer.correlation_id, code)]
    assert notices.after_seen == [answer.correlation_id + 1]  # the ApiVersions only
