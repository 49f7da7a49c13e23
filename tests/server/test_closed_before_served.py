"""A connection that closes before its worker task's first step leaves no coroutine unawaited.

A request whose handler is a coroutine (FindCoordinator's) goes to the connection's worker task;
a stop past its grace closes the connection and cancels that task, and a task cancelled before
its first step runs none of its code. What it was to await (the dispatcher's ``_finish`` and the
handler's coroutine inside it) then used to be dropped, reported as "coroutine ... was never
awaited" once per full run. Each test makes that order certain: the bytes of one read are handed
to the connection as its transport hands them, and the close follows in the same loop step.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings
from collections.abc import Awaitable, Callable

import pytest
from server_wire import request_frame, split_address

from kafkapy.embedded import Broker
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.connection import KafkaConnection, discard
from kafkapy.server.fastpaths import FastPaths

PIPELINED = 6  # FindCoordinator requests in one read: the first goes to the worker, the rest queue
FAST_PATHS = {"all fast paths": FastPaths(), "plain paths": FastPaths.none()}


def _find_coordinators() -> bytes:
    return b"".join(request_frame(ApiKey.FIND_COORDINATOR, 3, i, {"key": f"group-{i}", "key_type": 0})
                    for i in range(PIPELINED))


def _deliver(conn: KafkaConnection, data: bytes) -> None:
    """``data`` as one read of the connection's transport: into its buffers (a BufferedProtocol),
    or through ``data_received``."""
    if isinstance(conn, asyncio.BufferedProtocol):
        view = memoryview(data)
        while view:
            buffer = conn.get_buffer(len(view))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            conn.buffer_updated(n)
            view = view[n:]
    else:
        conn.data_received(data)


def _unawaited(run: Callable[[], Awaitable[None]]) -> list[str]:
    """The "never awaited" warnings raised while ``run`` runs on a fresh loop (and at the gc after)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(run())  # type: ignore[arg-type]
        gc.collect()
    return [str(w.message) for w in caught if "never awaited" in str(w.message)]


async def _served_connection(broker: Broker, writer: asyncio.StreamWriter) -> KafkaConnection:
    runtime = broker.runtime
    assert runtime is not None
    local = writer.get_extra_info("sockname")[:2]
    found: list[KafkaConnection] = await broker.wait_for(
        lambda: [c for c in runtime.connections if c.info is not None and c.info.client_address == local
                 and c.admitted and not c.busy],
        what="the connection admitted and idle")
    return found[0]


@pytest.mark.parametrize("fast_paths", FAST_PATHS.values(), ids=FAST_PATHS.keys())
@pytest.mark.parametrize("cancelled", [True, False], ids=["cancelled", "closed"])
def test_requests_read_just_before_the_close_are_closed_not_dropped(fast_paths: FastPaths,
                                                                    cancelled: bool) -> None:
    """``cancelled``: what a stop past its grace does (close, then cancel the worker); else the
    worker's first step finds the connection closed."""
    async def run() -> None:
        async with Broker(fast_paths=fast_paths) as broker:
            host, port = split_address(broker.bootstrap_servers)
            reader, writer = await asyncio.open_connection(host, port)
            conn = await _served_connection(broker, writer)
            _deliver(conn, _find_coordinators())
            worker = conn.worker
            assert worker is not None and not worker.done() and len(conn.queue) == PIPELINED - 1
            conn.close()
            if cancelled:
                worker.cancel()
            await broker.wait_for(lambda: worker.done() and conn not in broker.runtime.connections,  # type: ignore[union-attr]
                                  what="the connection gone")
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing answered
            writer.close()

    assert _unawaited(run) == []


def test_an_admission_the_close_comes_before_is_closed_not_dropped() -> None:
    """Without the eager fast path the admission is a coroutine for the worker to start."""
    async def run() -> None:
        async with Broker(fast_paths=FastPaths(eager=False)) as broker:
            runtime = broker.runtime
            assert runtime is not None
            client, server = socket.socketpair()
            server.setblocking(False)
            runtime._serve_plain(runtime.listeners[0], server, "127.0.0.1", None)
            await asyncio.sleep(0)  # connection_made has run: the worker is made, not yet started
            (conn,) = runtime.connections
            worker = conn.worker
            assert worker is not None and not worker.done() and conn.handed is not None
            conn.close()
            worker.cancel()
            await broker.wait_for(lambda: worker.done() and not runtime.connections,
                                  what="the connection gone")
            assert conn.handed is None and not conn.admitted
            client.close()

    assert _unawaited(run) == []


def test_a_worker_that_starts_goes_on_serving() -> None:
    """The request handed over is the first the worker awaits: the answers come in order."""
    async def run() -> None:
        async with Broker() as broker:
            host, port = split_address(broker.bootstrap_servers)
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(_find_coordinators())
            for correlation_id in range(PIPELINED):
                size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5), "big")
                body = await reader.readexactly(size)
                assert int.from_bytes(body[:4], "big") == correlation_id
            writer.close()

    assert _unawaited(run) == []


def test_discard_closes_the_coroutines_an_unstarted_one_holds() -> None:
    ran: list[str] = []

    async def handler() -> None:
        ran.append("handler")

    async def finish(answer: Awaitable[None]) -> None:
        ran.append("finish")
        await answer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        discard(finish(handler()))
        discard(asyncio.sleep(0))
        discard(object())  # not a coroutine: left alone
        gc.collect()
    assert ran == [] and [str(w.message) for w in caught] == []


def test_discard_goes_on_past_a_coroutine_that_will_not_close(caplog: pytest.LogCaptureFixture) -> None:
    """One that swallows GeneratorExit (a bug) is logged: connection_lost's cleanup (the quota
    slot, the close hooks) must still run after it."""
    async def stubborn() -> None:
        try:
            await asyncio.sleep(0)
        except GeneratorExit:  # swallowed once: the second close (the garbage collector's) ends it
            pass
        await asyncio.sleep(0)

    coro = stubborn()
    coro.send(None)  # started, suspended at its first sleep
    discard(coro)
    assert "closing" in caplog.text and "failed (ignored)" in caplog.text
