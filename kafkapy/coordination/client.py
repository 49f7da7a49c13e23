"""A seed-001 consumer's side of group management, in asyncio.

Start-up as the seed describes it: round-robin over the bootstrap brokers until one answers
ClusterMetadata, connect to the coordinator it names, RegisterConsumer, then keep reading the
coordinator's requests on that connection: Ping, StopFetcher and StartFetcher, each answered at
once. When the connection breaks, or nothing is heard from the coordinator for session_timeout,
the consumer revokes its partitions and discovers the coordinator again.
``close()`` first completes the seed's shutdown Ping handshake, so the last offsets arrive.

Fetching itself is the application's: ``on_assign`` receives the partitions (with start offsets)
and ``on_revoke`` says to stop; ``offsets`` reports what was consumed, for auto-commit.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from kafkapy.coordination.assignment import Subscription, parse_label
from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol import decode_request, decode_response, encode_request, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.wakeup import Wakeup

__all__ = ["AssignedPartition", "CoordinatedConsumer", "RegistrationError"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")


class RegistrationError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(f"RegisterConsumer failed with error {error_code}")
        self.error_code = error_code


@attrs.frozen
class AssignedPartition:
    thread_id: str
    topic: str
    partition: int
    broker_id: int  # from the seed's "<brokerId>-<partition>" label
    offset: int  # -1: nothing committed, auto_offset_reset applies


Callback = Callable[..., Any]


class CoordinatedConsumer:
    def __init__(self, bootstrap: Sequence[tuple[str, int]], group_id: str, consumer_id: str,
                 topics: Mapping[str, int] | None = None, *, pattern: str = "static",
                 session_timeout_ms: int = 6000, auto_commit: bool = True,
                 auto_offset_reset: str = "largest",
                 on_assign: Callable[[list[AssignedPartition]], Any] | None = None,
                 on_revoke: Callable[[], Any] | None = None,
                 offsets: Callable[[], Mapping[tuple[str, int], int]] | None = None,
                 retry_backoff_ms: int = 200, client_id: str = "kafkapy-coordinated-consumer") -> None:
        if not bootstrap:
            raise ValueError("bootstrap needs at least one (host, port)")
        self.bootstrap = list(bootstrap)
        self.group_id = group_id
        self.consumer_id = consumer_id
        self.subscription = Subscription(pattern, dict(topics or {}))
        self.session_timeout_ms = session_timeout_ms
        self.auto_commit = auto_commit
        self.auto_offset_reset = auto_offset_reset
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.offsets_callback = offsets
        self.retry_backoff = retry_backoff_ms / 1000
        self.client_id = client_id
        self.assignment: list[AssignedPartition] = []
        self.coordinator_id = -1
        self.brokers: dict[int, tuple[str, int]] = {}
        self.registered = asyncio.Event()  # set while registered with a coordinator
        self.last_error: int | None = None  # the last RegisterConsumer error code, if any
        self._next = 0  # round-robin position in the bootstrap list
        self._correlation = 0
        self._writer: asyncio.StreamWriter | None = None
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._shutdown: Wakeup | None = None  # set: close() may go on (seed handlePingRequest 1)
        self._shutdown_answered = False  # a Ping was answered since close() began

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self.run())
        return self._task

    async def close(self, graceful: bool = True) -> None:
        """Leave the group. Gracefully (seed 001, handlePingRequest step 1) while registered: answer
        the next Ping (with the offsets consumed so far when auto-committing), and with auto-commit
        also wait for the Ping after it, which shows the coordinator got that answer. At most
        session_timeout_ms is spent waiting (a dead coordinator pings no more)."""
        if graceful and self.registered.is_set() and self._task is not None and not self._task.done():
            self._shutdown = Wakeup()
            self._shutdown_answered = False
            if not await self._shutdown.wait(self.session_timeout_ms / 1000):
                log.info("%s: no Ping during shutdown; closing anyway", self.consumer_id)
        self._closing = True
        if self._writer is not None:
            self._writer.close()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def run(self) -> None:
        """Discover, register, serve the coordinator's requests; start over whenever that ends."""
        while not self._closing:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except RegistrationError as exc:
                log.info("%s: %s", self.consumer_id, exc)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, asyncio.TimeoutError) as exc:
                log.info("%s: coordinator connection lost (%s); rediscovering", self.consumer_id,
                         exc or type(exc).__name__)
            except DecodeError as exc:  # a frame it cannot read: no way to go on on that connection
                log.warning("%s: unreadable frame from the coordinator (%s); rediscovering",
                            self.consumer_id, exc)
            finally:
                self.registered.clear()
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
            await self._revoke()
            if not self._closing:
                await asyncio.sleep(self.retry_backoff)

    # --- one coordinator session ---------------------------------------------------------------

    async def _discover(self) -> tuple[str, int]:
        """Seed step 1-3: ClusterMetadata from the bootstrap brokers, round-robin, until one answers."""
        while True:
            host, port = self.bootstrap[self._next % len(self.bootstrap)]
            self._next += 1
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                        self.session_timeout_ms / 1000)
            except (OSError, asyncio.TimeoutError) as exc:
                log.info("%s: bootstrap broker %s:%d unreachable: %s", self.consumer_id, host, port, exc)
                await asyncio.sleep(self.retry_backoff)
                continue
            try:
                body = await asyncio.wait_for(self._call(reader, writer, ApiKey.CLUSTER_METADATA, {}),
                                              self.session_timeout_ms / 1000)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, DecodeError) as exc:
                log.info("%s: ClusterMetadata from %s:%d failed: %s", self.consumer_id, host, port, exc)
                await asyncio.sleep(self.retry_backoff)
                continue
            finally:
                writer.close()
            self.brokers = {b["id"]: (b["host"], b["port"]) for b in body["brokers_info"]}
            self.coordinator_id = body["coordinator_id"]
            if body["error_code"] == 0 and self.coordinator_id in self.brokers:
                return self.brokers[self.coordinator_id]
            await asyncio.sleep(self.retry_backoff)

    async def _session(self) -> None:
        host, port = await self._discover()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                self.session_timeout_ms / 1000)
        self._writer = writer
        register = {"group_id": self.group_id, "consumer_id": self.consumer_id,
                    "topic_count": self.subscription.to_json(), "auto_commit": self.auto_commit,
                    "auto_offset_reset": self.auto_offset_reset,
                    "session_timeout_ms": self.session_timeout_ms}
        correlation_id = self._send_request(writer, ApiKey.REGISTER_CONSUMER, register)
        timeout = self.session_timeout_ms / 1000
        while True:
            # Nothing heard for session_timeout: the coordinator is presumed dead (seed section 10).
            size = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), timeout))[0]
            if size < 4:  # not even a correlation id (or a negative size): nothing to read it as
                raise DecodeError(f"frame size {size}", truncated=True)
            frame = await asyncio.wait_for(reader.readexactly(size), timeout)
            first = _SIZE.unpack_from(frame, 0)[0]
            if first == correlation_id:  # our RegisterConsumer's answer
                error = decode_response(frame, ApiKey.REGISTER_CONSUMER, 0).body["error_code"]
                self.last_error = error
                if error:
                    raise RegistrationError(error)
                log.info("%s: registered with coordinator %d", self.consumer_id, self.coordinator_id)
                self.registered.set()
                continue
            request = decode_request(frame)
            shutdown, ping = self._shutdown, request.api_key == ApiKey.PING
            if shutdown is not None and ping and self._shutdown_answered:
                # 1.2: this Ping came after our last answer, so that answer (and its offsets) arrived.
                self._closing = True
                shutdown.set()
                return
            body = await self.answer(request.api_key, request.body)
            if body is not None:
                writer.write(self._framed(encode_response(request.api_key, 0, request.correlation_id, body)))
                await writer.drain()
                if shutdown is not None and ping:
                    if not self.auto_commit:  # 1.1: no offsets to deliver, done after this answer
                        self._closing = True
                        shutdown.set()
                        return
                    self._shutdown_answered = True

    async def answer(self, api_key: int, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The response to one coordinator request (None: do not answer)."""
        common = {"request_type_id": api_key, "error_code": ErrorCode.NONE, "consumer_id": self.consumer_id}
        if api_key == ApiKey.PING:
            return {**common, "offset_info": await self._offset_info()}
        if api_key == ApiKey.STOP_FETCHER:
            # Stop first, then report (seed 001): the offsets are final once the fetchers stopped,
            # and they are for the partitions just released, so labelled from that assignment.
            released = self.assignment
            await self._revoke()
            return {**common, "offset_info": await self._offset_info(released)}
        if api_key == ApiKey.START_FETCHER:
            self.brokers = {b["id"]: (b["host"], b["port"]) for b in body["brokers_info"]}
            parts = []
            for ownership in body["ownership_info"]:
                for part in ownership["assigned_parts"]:
                    label = part["partition"]
                    broker = int(label.rpartition("-")[0]) if "-" in label else -1
                    parts.append(AssignedPartition(ownership["consumer_thread_id"], part["topic"],
                                                   parse_label(label), broker, part["offset"]))
            self.assignment = parts
            await _call(self.on_assign, parts)
            return common
        log.warning("%s: unexpected request %d from the coordinator", self.consumer_id, api_key)
        return None

    async def _revoke(self) -> None:
        if self.assignment:
            self.assignment = []
            await _call(self.on_revoke)

    async def _offset_info(self, owned: Sequence[AssignedPartition] | None = None
                           ) -> list[dict[str, Any]] | None:
        """The consumed offsets of ``owned`` (default: the current assignment), each partition
        labelled ``<brokerId>-<partition>`` as StartFetcher gave it."""
        if owned is None:
            owned = self.assignment
        if not self.auto_commit:
            return None  # the seed: without auto-commit the offsets are left out entirely
        if self.offsets_callback is not None:
            offsets = self.offsets_callback()
            if inspect.isawaitable(offsets):
                offsets = await offsets
        else:
            offsets = {(p.topic, p.partition): p.offset for p in owned if p.offset >= 0}
        leaders = {(p.topic, p.partition): p.broker_id for p in owned}
        return [{"topic": t, "partition": f"{leaders.get((t, p), -1)}-{p}", "offset": o}
                for (t, p), o in sorted(offsets.items())]

    # --- wire ----------------------------------------------------------------------------------

    def _send_request(self, writer: asyncio.StreamWriter, api_key: int, body: Mapping[str, Any]) -> int:
        self._correlation += 1
        writer.write(self._framed(encode_request(api_key, 0, self._correlation, self.client_id, body)))
        return self._correlation

    async def _call(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int,
                    body: Mapping[str, Any]) -> dict[str, Any]:
        correlation_id = self._send_request(writer, api_key, body)
        await writer.drain()
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        if size < 4:
            raise DecodeError(f"frame size {size}", truncated=True)
        response = decode_response(await reader.readexactly(size), api_key, 0)
        if response.correlation_id != correlation_id:
            raise OSError(f"correlation id {response.correlation_id}, expected {correlation_id}")
        return dict(response.body)

    @staticmethod
    def _framed(frame: bytes) -> bytes:
        return _SIZE.pack(len(frame)) + frame


async def _call(callback: Callable[..., Any] | None, *args: Any) -> None:
    if callback is None:
        return
    result: Any = callback(*args)
    if inspect.isawaitable(result):
        awaited: Awaitable[Any] = result
        await awaited
