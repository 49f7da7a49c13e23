"""The catalogue of known API keys: request and response specs side by side,
and the one place that decides which header version a message uses."""

from __future__ import annotations

import functools
from collections.abc import Mapping

import attrs

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.specs import MessageSpec, standard_and_project_specs
from kafkapy.protocol.versions import VersionRange

__all__ = [
    "ApiSpec",
    "api_name",
    "catalogue",
    "get_api",
    "request_header_version",
    "response_header_version",
]


@attrs.frozen
class ApiSpec:
    """One API: its name, key, versions, and the two message specs."""

    api_key: int
    name: str
    request: MessageSpec
    response: MessageSpec

    @property
    def versions(self) -> VersionRange:
        """Every version this library can encode: from 0, because Kafka 4's specs
        dropped old versions from validVersions but kept their fields' ranges,
        and captures of older clients (Produce v2, ...) still need decoding."""
        return VersionRange(0, self.request.valid_versions.high)

    @property
    def kafka_versions(self) -> VersionRange:
        """The range the spec itself declares valid (what current Kafka accepts)."""
        return self.request.valid_versions

    @property
    def min_version(self) -> int:
        return self.versions.low

    @property
    def max_version(self) -> int:
        return self.versions.high

    @property
    def source(self) -> str:
        return self.request.source

    def is_flexible(self, version: int) -> bool:
        return self.request.is_flexible(version)


@functools.cache
def catalogue() -> Mapping[int, ApiSpec]:
    """Every API this library can encode and decode, by key."""
    requests: dict[int, MessageSpec] = {}
    responses: dict[int, MessageSpec] = {}
    for spec in standard_and_project_specs():
        if spec.api_key is None:
            continue
        if spec.type == "request":
            requests[spec.api_key] = spec
        elif spec.type == "response":
            responses[spec.api_key] = spec
    apis = {}
    for key in sorted(requests.keys() & responses.keys()):
        request = requests[key]
        name = request.name[: -len("Request")] if request.name.endswith("Request") else request.name
        apis[key] = ApiSpec(key, name, request, responses[key])
    return apis


def get_api(api_key: int) -> ApiSpec | None:
    return catalogue().get(api_key)


def api_name(api_key: int) -> str:
    """The API's name, e.g. "Metadata"; "Unknown(1234)" for a key no spec defines."""
    api = catalogue().get(api_key)
    return api.name if api is not None else f"Unknown({api_key})"


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header v2 for flexible versions, v1 otherwise; ControlledShutdown v0 keeps v0."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    api = catalogue().get(api_key)
    return 2 if api is not None and api.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header v1 for flexible versions; ApiVersions always v0 so old clients can read it."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    api = catalogue().get(api_key)
    return 1 if api is not None and api.is_flexible(api_version) else 0
