"""Coroutine handlers declared ``ApiHandler.in_place``: started inside the read that brought
the request, and held equal to the plain path (the connection's worker task, as with the
``eager`` fast path off).

GetTelemetrySubscriptions (served by no built-in module) answers by the client id: "now" without
waiting, "later" after a sleep, "refused" with a KafkaApiError before any wait. The handler
notes whether it started inside a task, which is what tells the two paths apart.
"""

from __future__ import annotations

import asyncio
import socket

import pytest
from server_wire import KafkaSocket, frame

from kafkapy import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol import Request, decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.fastpaths import FastPaths
from kafkapy.server.modules import ApiHandler, Module, RequestContext

SOFTWARE = {"client_software_name": "in-place-tests", "client_software_version": "1.0"}
SUBSCRIPTIONS = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
WAIT_S = 0.05
CLIENTS = ["now", "later", None, "refused", "now"]  # None: an ApiVersions between them


class InPlaceSubscriptions(Module):
    name = "in-place-subscriptions"
    started_in_task: list[bool] = []

    def apis(self) -> dict[int, ApiHandler]:
        return {SUBSCRIPTIONS: ApiHandler(VersionRange(0, 0), self._subscriptions, in_place=True)}

    async def _subscriptions(self, context: RequestContext, request: Request) -> dict[str, int]:
        InPlaceSubscriptions.started_in_task.append(asyncio.current_task() is not None)
        if context.client_id == "refused":
            raise KafkaApiError(ErrorCode.TELEMETRY_TOO_LARGE)
        if context.client_id == "later":
            await asyncio.sleep(WAIT_S)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                "push_interval_ms": len(context.client_id)}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _exchange(fast_paths: FastPaths, port: int) -> list[bytes]:
    """The requests of CLIENTS in one write; every answer, in order."""
    InPlaceSubscriptions.started_in_task = []
    config = {"broker.id": 5, "cluster.id": "in-place-cluster", "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    with Broker(config, modules=[InPlaceSubscriptions], fast_paths=fast_paths) as b, \
            KafkaSocket(b.bootstrap_servers) as s:
        s.send_raw(b"".join(frame(encode_request(ApiKey.API_VERSIONS, 3, n, "v", SOFTWARE) if client is None
                                  else encode_request(SUBSCRIPTIONS, 0, n, client, {}))
                            for n, client in enumerate(CLIENTS, start=1)))
        answers = [s.read_frame() for _ in CLIENTS]
        assert b.runtime is not None
        route = b.runtime.dispatcher.routes[SUBSCRIPTIONS]
        assert (route.handle is not route.handler.handle) == fast_paths.eager  # stepped in place
    return answers


@pytest.mark.parametrize("eager", [True, False], ids=["in place", "plain path"])
def test_answers_come_in_order_with_their_errors(eager: bool) -> None:
    for n, (client, answer) in enumerate(zip(CLIENTS, _exchange(FastPaths(eager=eager), _free_port()),
                                             strict=True), start=1):
        response = decode_response(answer, ApiKey.API_VERSIONS, 3) if client is None \
            else decode_response(answer, SUBSCRIPTIONS, 0)
        assert response.correlation_id == n
        if client is not None:
            expected = ErrorCode.TELEMETRY_TOO_LARGE if client == "refused" else ErrorCode.NONE
            assert response.body["error_code"] == expected
            assert response.body["push_interval_ms"] == (0 if client == "refused" else len(client))


def test_in_place_handlers_start_inside_the_read_and_answer_byte_for_byte_as_the_worker() -> None:
    port = _free_port()
    in_place = _exchange(FastPaths(), port)
    started = InPlaceSubscriptions.started_in_task
    plain = _exchange(FastPaths(eager=False), port)
    assert in_place == plain
    assert InPlaceSubscriptions.started_in_task == [True] * 4
    # "now" and "later" start in place; "later" suspends, and the worker finishes it and serves
    # the requests queued behind it, inside its task.
    assert started == [False, False, True, True]


def test_a_plain_function_handler_is_left_as_it_is() -> None:
    with Broker() as b:
        assert b.runtime is not None
        routes = b.runtime.dispatcher.routes
        assert routes[ApiKey.METADATA].handle is routes[ApiKey.METADATA].handler.handle
        assert routes[ApiKey.END_TXN].handler.in_place
