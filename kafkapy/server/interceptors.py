"""Interceptors: an ordered chain around every handler, for what is not one API's business.

Byte-rate quotas (Kafka answers with throttle_time_ms and mutes the channel for
that long), fault injection in tests, and the like need to act on requests of
every API without any handler knowing. An interceptor can, before the handler:

* answer the request itself (``before`` returns an answer instead of ``PASS``:
  the handler and the interceptors after it are skipped, kfake's ``ControlKey``);
* delay it (``before`` awaits);
* drop the connection (raise ``CloseConnection``: no answer, the connection closes);

and after the handler (``after`` gets the answer):

* rewrite the answer (return another body; None sends none);
* delay it (``after`` awaits; the connection answers in request order, so every
  request behind it waits too: Kafka's muted channel);
* drop the connection (raise ``CloseConnection``).

Order is an onion: the first interceptor installed is the outermost, its
``before`` runs first and its ``after`` last. When one answers in ``before``,
only the interceptors outside it see that answer in their ``after``.

Cost: the dispatcher runs the chain only while an interceptor is installed (and
then memoizes no answers, since every request must reach the chain); with none,
requests take the same path as before the seam existed. Per request, each
interceptor is first asked ``applies(context)``, synchronously: one that says
False is left out of that request's chain (both hooks), and a request no
interceptor applies to is handled exactly as with none installed. So a fault
rule for another API, or a byte-rate quota on Produce, costs other requests one
call. The chain that remains is a coroutine, and runs in the connection's worker
task; but when every interceptor in it says ``steps_in_place`` (its hooks use no
``asyncio.timeout()`` or ``current_task()`` before they first suspend: the
fault injector and the client quotas), the dispatcher steps it in place
(kafkapy.server.eager), and a request none of whose hooks suspends costs no task.
A coroutine handler still starts inside the task (``into_task``, below).
Interceptors see the requests the broker routes to a handler; the answers to
unknown keys and unsupported versions are the dispatcher's own.

Two notices, for interceptors that judge rather than change (strict mode, kafkapy.strict): a
request the dispatcher answers itself as unknown or unsupported is told to ``unrouted``, and a
handler's KafkaApiError (which the dispatcher turns into the answer's top-level error code,
after the chain) is told to ``refused`` on its way out. Neither can change the answer.

Observers (kafkapy.server.observers) stay read-only: they see requests and
responses but cannot change them; an interceptor is what can.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Final

from kafkapy.errors import KafkaApiError
from kafkapy.server.connection import CloseConnection
from kafkapy.server.eager import into_task

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.modules import Answer, Handler, RequestContext

__all__ = ["PASS", "CloseConnection", "Interceptor", "Pass", "run_chain"]


class Pass:
    """The type of PASS: "not answered here, go on"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PASS"


PASS: Final = Pass()


class Interceptor:
    """Base class: both hooks default to doing nothing, so override only what you need."""

    # Whether the dispatcher may start the hooks outside a task (module docstring): only for
    # hooks that call neither asyncio.timeout() (nor asyncio.wait_for, which is asyncio.timeout()
    # inside on Python 3.12+) nor asyncio.current_task() before suspending.
    steps_in_place: ClassVar[bool] = False

    def applies(self, context: RequestContext) -> bool:
        """Whether this request may concern the interceptor. False is a promise: ``before``
        would PASS and ``after`` return the answer unchanged, with no other effect, so both are
        skipped. Called for every request while installed: keep it to a few dict looks."""
        return True

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        """PASS to go on to the next interceptor (and, last, the handler), or the answer."""
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        """The answer to send (``answer`` itself to leave it alone)."""
        return answer

    def unrouted(self, context: RequestContext) -> None:
        """Told of a request for an API or version the broker does not serve (not decoded: the
        dispatcher answers it as unknown, whatever is done here)."""

    def refused(self, context: RequestContext, request: Request, refusal: KafkaApiError) -> None:
        """Told that the handler refused ``request`` with ``refusal`` (no ``after`` runs for it)."""


async def run_chain(chain: Sequence[Interceptor], handle: Handler, context: RequestContext,
                    request: Request) -> Answer:
    """The request through ``chain`` and the handler, as the module docstring says."""
    answered_by = len(chain)
    answer: Answer
    for index, interceptor in enumerate(chain):
        verdict = await interceptor.before(context, request)
        if not isinstance(verdict, Pass):
            answer, answered_by = verdict, index
            break
    else:
        try:
            result = handle(context, request)
            if inspect.isawaitable(result):
                await into_task()  # a coroutine handler starts inside the task, even when stepped in place
                answer = await result
            else:
                answer = result
        except KafkaApiError as refusal:
            for interceptor in reversed(chain):
                interceptor.refused(context, request, refusal)
            raise
    for interceptor in reversed(chain[:answered_by]):
        answer = await interceptor.after(context, request, answer)
    return answer
