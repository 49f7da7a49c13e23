"""A real HTTP client (http.client) for the control endpoint, and an embedded broker serving one."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from kafkapy.embedded import Broker

if TYPE_CHECKING:
    from .test_control_openapi import Checked

HISTORY = {"observer.class.names": "kafkapy.observers.RequestHistory"}


class ControlClient:
    """``client.call("POST", "/faults", {...})`` answers (status, decoded JSON body)."""

    def __init__(self, url: str) -> None:
        split = urlsplit(url)
        self.host, self.port = split.hostname or "127.0.0.1", split.port or 80
        self.url = url

    def raw(self, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read(), dict(response.getheaders())
        finally:
            connection.close()

    def call(self, method: str, path: str, body: Any = None, *, text: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = text if text is not None else None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        status, raw, got = self.raw(method, path, data, sent)
        assert got["Content-Type"] == "application/json"
        return status, json.loads(raw)


@pytest.fixture
def controlled() -> Iterator[tuple[Broker, ControlClient]]:
    """A broker keeping a request history, serving its control endpoint on an ephemeral port."""
    with Broker(HISTORY, control="127.0.0.1:0") as broker:
        assert broker.control is not None
        yield broker, ControlClient(broker.control.url)


@pytest.fixture
def controlled_cluster() -> Iterator[tuple[Broker, Checked]]:
    """Two brokers keeping a request history, serving their control endpoint, with a client whose
    every answer is checked against the OpenAPI document."""
    from .test_control_openapi import Checked  # which imports this module

    with Broker(HISTORY, brokers=2, control="127.0.0.1:0") as broker:
        assert broker.control is not None
        yield broker, Checked(ControlClient(broker.control.url))
