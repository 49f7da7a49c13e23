"""Helpers shared by the feature tests (tests are not a package: pytest puts this directory on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kafka import KafkaAdminClient

import kafkapy
from kafkapy.client import SimpleClient


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


@contextmanager
def admin(bootstrap: str) -> Iterator[Any]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        yield client
    finally:
        client.close()


def request(bootstrap: str, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    with SimpleClient(bootstrap, timeout=10.0, client_id="feature-tests") as client:
        return client.request(api_key, version, body)


def api_versions(bootstrap: str, version: int = 3) -> Any:
    return request(bootstrap, 18, version, {"client_software_name": "feature-tests",
                                            "client_software_version": kafkapy.__version__})


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in api_versions(bootstrap)["api_keys"]}


def finalized(bootstrap: str) -> tuple[int, dict[str, int]]:
    body = api_versions(bootstrap)
    return body["finalized_features_epoch"], {f["name"]: f["max_version_level"]
                                              for f in body["finalized_features"]}
