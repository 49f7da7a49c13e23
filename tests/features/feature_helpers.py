"""Helpers shared by the feature tests (tests are not a package: pytest puts this directory on sys.path)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kafka import KafkaAdminClient

import kafkapy
from kafkapy.client import SimpleClient
from kafkapy.testing import wait_until  # noqa: F401  (re-exported for the tests here)


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
