"""The control endpoint: HTTP/JSON on the broker's own loop, for tests not written in Python.

``ControlServer(broker, "127.0.0.1:0")`` serves the routing table of kafkapy.control.handlers
with the small server of kafkapy.control.http; ``Broker(control=...)`` and ``kafkapy serve
--control`` start one. Running on the broker's loop, every handler sees the broker between two
requests, never half way through one, and uses the broker's ``*_async`` methods.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from kafkapy.control.address import ControlAddress, parse_control_address
from kafkapy.control.handlers import ROUTES, ControlApi
from kafkapy.control.http import HttpServer
from kafkapy.control.routes import Router
from kafkapy.control.target import ControlTarget

__all__ = ["ControlServer", "openapi_document"]


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description shipped beside this module (docs/control-openapi.json)."""
    text = resources.files(__package__).joinpath("openapi.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


class ControlServer:
    def __init__(self, target: ControlTarget, address: str | ControlAddress = "127.0.0.1:0", *,
                 allow_remote: bool = False) -> None:
        self.address = address if isinstance(address, ControlAddress) else \
            parse_control_address(address, allow_remote=allow_remote)
        self.api = ControlApi(target, openapi_document())
        self.router = Router(ROUTES, self.api)
        self._http = HttpServer(self.router)
        self.bound: tuple[str, int] | None = None

    async def start(self) -> ControlServer:
        self.bound = await self._http.start(self.address.host, self.address.port)
        return self

    async def stop(self) -> None:
        await self._http.stop()
        self.bound = None

    @property
    def url(self) -> str:
        """``http://host:port`` as bound (the port chosen for port 0)."""
        if self.bound is None:
            raise RuntimeError("the control endpoint is not started")
        host, port = self.bound
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
