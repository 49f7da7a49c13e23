"""The fault injector: one interceptor that applies the installed rules, and their handles.

Theory of operation
-------------------
``Faults`` holds the rules in installation order, as a tuple replaced whole on every change
(so the loop thread, which reads it per request, never sees half an update while a test thread
adds or removes a rule). The interceptor is installed with the first rule and removed with the
last: with no rule there is no interceptor, and requests cost what they cost without faults.

Requests of an API no rule names are none of the injector's business: ``applies`` says so from
an index of the rules' API keys (rebuilt with the tuple), so they skip the chain and cost what
they cost without faults, unless a Throttle's mute is pending on their connection. The injector's
hooks may be stepped in place (``steps_in_place``): they only sleep or wait on an event.

Per request, ``before`` walks the rules in order; the first that matches *and fires* decides
(later rules are not consulted, so two rules never act on one request). A firing rule acts at
once (ErrorAnswer, DropConnection before, Stall) or marks the request so that ``after`` acts on
the answer (Delay, Throttle, DropConnection after, TruncateResponse). Counting is per handle:
``matched`` counts matching requests, ``fired`` those it acted on.

Changes from other threads (a test's, while the broker runs on its own loop) are carried out
on the broker's loop and waited for, so a request sent after ``add`` returns meets the rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kafkapy.errors import KafkaApiError
from kafkapy.faults.matching import named_partitions
from kafkapy.faults.rules import (
    Delay,
    DropConnection,
    ErrorAnswer,
    FaultRule,
    Stall,
    Throttle,
    TruncateResponse,
)
from kafkapy.protocol.catalogue import api_name
from kafkapy.protocol.chunks import joined
from kafkapy.protocol.codec import encode_response_body, fit_body
from kafkapy.protocol.error_answers import error_answer
from kafkapy.server.connection import CloseConnection
from kafkapy.server.interceptors import PASS, Interceptor, Pass
from kafkapy.server.modules import Answer, ChunkedResponse, EncodedResponse

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.modules import RequestContext
    from kafkapy.server.services import BrokerServices

__all__ = ["FaultHandle", "FaultInjector", "Faults", "scoped"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_MUTED_UNTIL = "faults.muted_until"  # ConnectionInfo.attributes: loop time a Throttle's mute ends
THROTTLE_TIME = "throttle_time_ms"
_FIRED = "faults.fired"  # ConnectionInfo.attributes: the handle that fired for the request in hand


class _Removable(Protocol):
    def remove(self) -> None: ...


H = TypeVar("H", bound=_Removable)


@contextlib.contextmanager
def scoped(add: Callable[[FaultRule], H], rule: FaultRule) -> Iterator[H]:
    """``add(rule)`` on entering the block, its handle removed on leaving (``injected``)."""
    handle = add(rule)
    try:
        yield handle
    finally:
        handle.remove()


class FaultHandle:
    """An installed rule: how often it matched and fired; ``remove()`` uninstalls it."""

    def __init__(self, faults: Faults, rule: FaultRule) -> None:
        self.rule = rule
        self.matched = 0
        self.fired = 0
        # Requests whose ``when`` raised (taken as not matching), and the APIs warned of once each.
        self.when_errors = 0
        self._when_warned: set[int] = set()
        self.removed = False
        self._faults = faults
        self._random = random.Random(rule.seed)
        self._released: asyncio.Event | None = None  # Stall: set when the rule is removed

    def remove(self) -> None:
        """Uninstall the rule (again: nothing); stalled requests go on."""
        self._faults.remove(self)

    def __repr__(self) -> str:
        return f"FaultHandle({self.rule!r}, matched={self.matched}, fired={self.fired})"

    def _fires(self) -> bool:
        """Count a match; whether the rule acts on it (module docstring of kafkapy.faults.rules)."""
        rule = self.rule
        self.matched += 1
        if rule.times is not None and self.fired >= rule.times:
            return False
        if self.matched % rule.every:
            return False
        if rule.probability < 1.0 and self._random.random() >= rule.probability:
            return False
        self.fired += 1
        return True

    async def _stall(self) -> None:
        if self._released is None:
            self._released = asyncio.Event()
        await self._released.wait()

    def _release(self) -> None:
        self.removed = True
        if self._released is not None:
            self._released.set()


class FaultInjector(Interceptor):
    """The interceptor that applies ``faults``' rules (module docstring)."""

    steps_in_place = True

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def applies(self, context: RequestContext) -> bool:
        faults = self.faults
        return (faults.every_api or context.api_key in faults.api_keys
                or _MUTED_UNTIL in context.connection.attributes)

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        attributes = context.connection.attributes
        attributes.pop(_FIRED, None)  # left by a request whose handler raised (no ``after`` ran)
        muted_until = attributes.get(_MUTED_UNTIL)
        if muted_until is not None:
            wait = muted_until - self.faults.clock()
            if wait > 0:
                await asyncio.sleep(wait)  # a Throttle's mute, as KIP-219's
            del attributes[_MUTED_UNTIL]
        handle = self.faults.firing(context, request)
        if handle is None:
            return PASS
        action = handle.rule.action
        if isinstance(action, ErrorAnswer):
            try:
                return error_answer(context.api_key, context.api_version, request.body, action.code)
            except ValueError:  # nowhere in this answer to say it: the connection closes
                raise KafkaApiError(action.code) from None
        if isinstance(action, DropConnection) and action.when == "before":
            raise CloseConnection
        if isinstance(action, Stall):
            await handle._stall()
            return PASS
        attributes[_FIRED] = handle
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        handle = context.connection.attributes.pop(_FIRED, None)
        if not isinstance(handle, FaultHandle):
            return answer
        action = handle.rule.action
        if isinstance(action, Delay):
            await asyncio.sleep(action.seconds)
        elif isinstance(action, DropConnection):
            raise CloseConnection
        elif isinstance(action, Throttle):
            return self._throttled(context, answer, action.milliseconds)
        elif isinstance(action, TruncateResponse):
            return _truncated(context, answer, action.keep)
        return answer

    def _throttled(self, context: RequestContext, answer: Answer, milliseconds: int) -> Answer:
        context.connection.attributes[_MUTED_UNTIL] = self.faults.clock() + milliseconds / 1000
        body: Any = answer.body if isinstance(answer, (ChunkedResponse, EncodedResponse)) else answer
        if not isinstance(body, Mapping) or not _has_throttle_field(context.api_key, context.api_version):
            return answer  # no field to say it in (or no answer): the mute alone delays what follows
        if isinstance(answer, ChunkedResponse):
            return ChunkedResponse({**answer.body, THROTTLE_TIME: milliseconds})
        return {**body, THROTTLE_TIME: milliseconds}


@functools.cache
def _has_throttle_field(api_key: int, api_version: int) -> bool:
    return THROTTLE_TIME in fit_body(api_key, "response", api_version, {THROTTLE_TIME: 0})


def _truncated(context: RequestContext, answer: Answer, keep: float) -> Answer:
    if answer is None:
        return None  # no answer to cut (Produce acks=0)
    body: Any = answer.body if isinstance(answer, (ChunkedResponse, EncodedResponse)) else answer
    if isinstance(answer, ChunkedResponse):
        body = joined(answer.body)
    data = encode_response_body(context.api_key, context.api_version, body)
    return EncodedResponse(body, data[:int(len(data) * keep)])


class Faults:
    """The rules installed on one broker: ``add`` (a handle), ``injected`` (scoped to a block),
    ``clear``. Built by the faults module (kafkapy.faults.module) with its services."""

    def __init__(self, services: BrokerServices) -> None:
        self._services = services
        self.clock: Callable[[], float] = services.clock
        self.handles: tuple[FaultHandle, ...] = ()
        # The index FaultInjector.applies reads: the API keys the rules name, or every API if a
        # rule names none. Replaced together with ``handles``, on the loop.
        self.api_keys: frozenset[int] = frozenset()
        self.every_api = False
        self._injector = FaultInjector(self)
        self._installed = False

    def add(self, rule: FaultRule) -> FaultHandle:
        """Install ``rule`` after the others; from any thread."""
        if not isinstance(rule, FaultRule):  # else an AttributeError from deep in the handle
            raise TypeError(f"faults.add takes a FaultRule (kafkapy.faults), such as "
                            f"FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE), "
                            f"not {rule!r}")
        handle = FaultHandle(self, rule)

        def install() -> None:
            self.handles = (*self.handles, handle)
            self._index()
            if not self._installed:
                self._services.install_interceptor(self._injector)
                self._installed = True
        self._on_loop(install)
        return handle

    def remove(self, handle: FaultHandle) -> None:
        def uninstall() -> None:
            if handle in self.handles:
                self.handles = tuple(h for h in self.handles if h is not handle)
                self._index()
            handle._release()
            if not self.handles and self._installed:
                self._services.remove_interceptor(self._injector)
                self._installed = False
        self._on_loop(uninstall)

    def _index(self) -> None:
        rules = [handle.rule for handle in self.handles]
        self.every_api = any(rule.api is None for rule in rules)
        self.api_keys = frozenset(int(key) for rule in rules for key in rule.api or ())

    def clear(self) -> None:
        """Remove every rule."""
        for handle in self.handles:
            self.remove(handle)

    def injected(self, rule: FaultRule) -> contextlib.AbstractContextManager[FaultHandle]:
        """``with faults.injected(rule) as handle:``: the rule holds inside the block only."""
        return scoped(self.add, rule)

    def firing(self, context: RequestContext, request: Request) -> FaultHandle | None:
        """The first handle whose rule matches this request and fires."""
        for handle in self.handles:
            if self._matches(handle, context, request) and handle._fires():
                return handle
        return None

    def _matches(self, handle: FaultHandle, context: RequestContext, request: Request) -> bool:
        rule = handle.rule
        if rule.api is not None and context.api_key not in rule.api:
            return False
        if rule.versions is not None and not rule.versions[0] <= context.api_version <= rule.versions[1]:
            return False
        if rule.client_id is not None and context.client_id != rule.client_id:
            return False
        if rule.connection is not None and context.connection.id != rule.connection:
            return False
        if rule.topic is not None:
            named = named_partitions(request.body, self._topic_name)
            if not any(topic == rule.topic and (rule.partition is None or partition == rule.partition)
                       for topic, partition in named):
                return False
        if rule.when is None:
            return True
        try:
            return bool(rule.when(request.body))
        except Exception as exc:
            # A predicate written for one API's body (body["transactional_id"]) meets another's: that
            # request does not match, where the error closed the client's connection with a traceback.
            handle.when_errors += 1
            if context.api_key not in handle._when_warned:
                handle._when_warned.add(context.api_key)
                log.warning("fault rule %r: its when= raised %s on %s v%d, so it does not match that "
                            "request (give api= to keep it to the requests it reads)", rule,
                            f"{type(exc).__name__}: {exc}", api_name(context.api_key), context.api_version)
            return False

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._services.cluster.topic_name(topic_id)

    def _on_loop(self, change: Callable[[], None]) -> None:
        """Run ``change`` on the broker's loop, now if this is its thread (or it is not running)."""
        loop = self._services.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or not loop.is_running():
            change()
            return

        async def run() -> None:
            change()
        asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=30)
