"""The control endpoint's routing table: one ``Route`` per (method, path), one handler each.

Paths are templates (``/faults/{id}``); a ``{name}`` segment matches one path segment and is
handed to the handler as ``call.params[name]``. The table is data, so the OpenAPI document
(openapi.json beside this file) can be held equal to it by a test: every route documented,
every documented operation served. Adding an endpoint is one ``Route`` here and one operation
there.

Dispatch answers what no handler could: 404 for a path no route has, 405 (with ``Allow``'s
methods in the message) for a known path asked with another method. A handler's ControlError
becomes its status and message; anything else it raises is a 500 with a one-line message
(logged with its traceback), and the server goes on serving.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any, Generic, TypeVar

import attrs

from kafkapy.control.errors import ControlError
from kafkapy.control.http import HttpRequest, HttpResponse, json_error

__all__ = ["Call", "Handler", "Reply", "Route", "Router"]

log = logging.getLogger(__name__)

Reply = tuple[int, Any]  # HTTP status and a JSON-able body


@attrs.frozen
class Call:
    """One request as a handler sees it."""

    request: HttpRequest
    params: Mapping[str, str]  # the path template's {name} segments

    def json(self, *, required: bool = True) -> Any:
        """The body as JSON (NaN and Infinity refused: they are not JSON); None when empty and
        not ``required``."""
        if not self.request.body.strip():
            if required:
                raise ControlError("expected a JSON body")
            return None
        try:
            return json.loads(self.request.body, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, too deep
            raise ControlError(f"the body is not valid JSON: {exc}") from None

    def query_int(self, name: str, default: int | None = None, *, low: int = 0) -> int | None:
        text = self.request.query.get(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ControlError(f"query {name}: expected an integer, not {text!r}") from None
        if value < low:
            raise ControlError(f"query {name}: expected an integer of at least {low}, not {value}")
        return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


C = TypeVar("C")  # what every handler is handed besides the call: the endpoint's state

Handler = Callable[[C, Call], Awaitable[Reply]]


@attrs.frozen
class Route(Generic[C]):
    method: str
    path: str  # a template: /faults/{id}
    handler: Handler[C]
    summary: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.path)


_TEMPLATE_SEGMENT = re.compile(r"\{([a-z_]+)\}")


def _compiled(template: str) -> re.Pattern[str]:
    parts = _TEMPLATE_SEGMENT.split(template)
    # split alternates literal text and names: literal, name, literal, ...
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts))
    return re.compile(f"^{regex}$")


class Router(Generic[C]):
    """Dispatches requests over a table of routes, handing each handler ``context`` (module
    docstring)."""

    def __init__(self, routes: tuple[Route[C], ...], context: C) -> None:
        seen = {(r.method, r.path) for r in routes}
        if len(seen) != len(routes):
            raise ValueError("two routes share a method and path")
        self.routes = routes
        self.context = context
        self._compiled = [(route, route.pattern) for route in routes]

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        allowed: list[str] = []
        for route, pattern in self._compiled:
            found = pattern.match(request.path)
            if found is None:
                continue
            if route.method != request.method:
                allowed.append(route.method)
                continue
            return await self._run(route, Call(request, found.groupdict()))
        if allowed:
            return json_error(HTTPStatus.METHOD_NOT_ALLOWED,
                              f"{request.method} is not allowed on {request.path}; use {', '.join(allowed)}")
        return json_error(HTTPStatus.NOT_FOUND, f"no route {request.method} {request.path} "
                                                "(see GET /openapi.json)")

    async def _run(self, route: Route[C], call: Call) -> HttpResponse:
        try:
            status, body = await route.handler(self.context, call)
        except ControlError as exc:
            return json_error(exc.status, str(exc))
        except Exception as exc:  # a bug, or a broker refusing: one line out, the server goes on
            log.exception("control %s %s failed", route.method, route.path)
            return json_error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
        if isinstance(body, HttpResponse):
            return body
        return HttpResponse.json(status, body)
