"""An error answer to any request, built from the response's schema rather than by hand per API.

Fault injection and version emulation must answer "this failed with code X" to requests of every
API, the way a broker would: per partition where the response has partitions, else per topic
(or group), else at the top. Writing that for ~80 APIs by hand would be ~80 chances to get a
field wrong, so it is derived from the message specs.

Theory of operation
-------------------
The response spec is walked alongside the decoded request. A struct array of the response is
paired with the first struct array of the request whose elements share an *identity* field
with it (a topic name or id, a partition index, a group id, ...; spelled differently across
APIs, so names are folded by ``IDENTITY_ALIASES``: Produce's request ``topic_data[].name``
pairs with its response ``responses[].name``, Fetch's ``partitions[].partition`` with
``partitions[].partition_index``). The answer gets one element per request element, with the
identity fields copied, and the walk goes down. ``error_code`` is set on the deepest structs
reached: a struct sets its own only when none of its paired arrays carried the code further
down, so Produce answers per partition, Metadata per topic, and an API with nothing to pair
(JoinGroup) at the top. Offsets (int64 ``*offset`` fields and ``high_watermark``) without a spec
default are -1, as in Kafka's own error answers (ProduceResponse's and FetchResponse's
INVALID_OFFSET); every other field takes its spec default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kafkapy.protocol.catalogue import get_api
from kafkapy.protocol.codec import UnknownApiError, fit_body
from kafkapy.protocol.schema import Body
from kafkapy.protocol.specs import FieldSpec

__all__ = ["IDENTITY_ALIASES", "error_answer", "has_error_code"]

ERROR_CODE: Final = "error_code"
INVALID_OFFSET: Final = -1  # Kafka's ProduceResponse.INVALID_OFFSET, FetchResponse.INVALID_HIGH_WATERMARK

# Field name (snake case) -> what it identifies. Names absent here are never copied or paired.
IDENTITY_ALIASES: Final[Mapping[str, str]] = {
    "name": "topic", "topic": "topic", "topic_name": "topic",
    "topic_id": "topic_id",
    "partition_index": "partition", "partition": "partition", "index": "partition",
    "partition_id": "partition",
    "group_id": "group", "transactional_id": "transaction", "member_id": "member",
    "resource_name": "resource",
}


def error_answer(api_key: int, api_version: int, request: Mapping[str, Any], code: int) -> Body:
    """The response to ``request`` (a decoded body) that fails it with ``code``, as described in
    the module docstring. A ValueError when the answer has nowhere to carry it (no top-level
    ``error_code``, and no element of the request that pairs with one that has one)."""
    api = get_api(api_key)
    if api is None:
        raise UnknownApiError(f"unknown API key {api_key}", api_key=api_key)
    body, carried = _answer(api.response.fields, request, code, api_version)
    if not carried:
        raise ValueError(f"{api.name} v{api_version}: this answer has no error_code to carry {code}")
    return fit_body(api_key, "response", api_version, body)


def has_error_code(api_key: int, api_version: int) -> bool:
    """Whether ``error_answer`` can answer this API version (some field carries an error code)."""
    api = get_api(api_key)
    return api is not None and _has_error_code(api.response.fields, api_version)


def _has_error_code(fields: Sequence[FieldSpec], version: int) -> bool:
    for field in fields:
        if version not in field.versions:
            continue
        if field.snake == ERROR_CODE or (field.fields is not None and _has_error_code(field.fields, version)):
            return True
    return False


def _identities(names: Sequence[str]) -> dict[str, str]:
    """identity -> the field name that holds it, among ``names``."""
    found: dict[str, str] = {}
    for name in names:
        identity = IDENTITY_ALIASES.get(name)
        if identity is not None:
            found.setdefault(identity, name)
    return found


def _paired_array(field: FieldSpec, version: int, request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's struct array whose elements share an identity with ``field``'s elements."""
    assert field.fields is not None
    wanted = _identities([f.snake for f in field.fields if version in f.versions])
    if not wanted:
        return []
    for value in request.values():
        if isinstance(value, list) and value and isinstance(value[0], Mapping):
            if wanted.keys() & _identities(list(value[0].keys())).keys():
                return value
    return []


def _answer(fields: Sequence[FieldSpec], request: Mapping[str, Any], code: int,
            version: int) -> tuple[dict[str, Any], bool]:
    """(the answer struct, whether the code was set in it or below)."""
    out: dict[str, Any] = {}
    carried_below = False
    has_own = False
    for field in fields:
        if version not in field.versions:
            continue
        if field.snake == ERROR_CODE:
            has_own = True
        elif field.type == "int64" and field.default is None and \
                (field.snake.endswith("offset") or field.snake == "high_watermark"):
            out[field.snake] = INVALID_OFFSET
        elif field.is_struct_array:
            assert field.fields is not None
            elements = []
            for element in _paired_array(field, version, request):
                answer, carried = _answer(field.fields, element, code, version)
                identities = _identities(list(element.keys()))
                for sub in field.fields:
                    identity = IDENTITY_ALIASES.get(sub.snake)
                    if identity in identities and version in sub.versions:
                        answer[sub.snake] = element[identities[identity]]
                carried_below |= carried
                elements.append(answer)
            out[field.snake] = elements
    if has_own and not carried_below:
        out[ERROR_CODE] = code
        return out, True
    return out, carried_below
