"""Fuzzing the ids a fault rule matches by (transactional id, group): whatever a request body holds
(bodies decoded from any bytes a client sent, of any API key, known or not), carried_ids yields
strings only, and exactly the ids at the table's paths, never an exception."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.faults.carried_ids import FIND_COORDINATOR_KEYS, ID_FIELDS, IdKind, carried_ids
from kafkapy.protocol.api_keys import ApiKey

_KEYS = sorted({part for paths in ID_FIELDS.values() for path in paths.values() for p in path
                for part in p.split(".")} | set(FIND_COORDINATOR_KEYS) | {"key_type", "topics"})
_SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=4) | st.binary(max_size=2)
_BODIES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(_KEYS) | st.text(max_size=3), inner, max_size=4), max_leaves=12)


@given(st.sampled_from(sorted(ApiKey)) | st.integers(-1, 200),
       st.dictionaries(st.sampled_from(_KEYS), _BODIES, max_size=4),
       st.sampled_from(sorted(IdKind, key=lambda k: k.value)))
def test_any_body_yields_strings_only(api_key: int, body: dict[str, Any], kind: IdKind) -> None:
    assert all(isinstance(found, str) for found in carried_ids(api_key, body, kind))


@given(st.sampled_from(sorted(IdKind, key=lambda k: k.value)).flatmap(
    lambda kind: st.tuples(st.just(kind), st.sampled_from(sorted(ID_FIELDS[kind])))),
    st.text(max_size=5), st.lists(st.booleans(), min_size=2, max_size=2))
def test_an_id_where_the_table_says_is_found(kind_and_key: tuple[IdKind, ApiKey], found: str,
                                             batched: list[bool]) -> None:
    """At each path of the table, one id or a batch of entries each holding one (a list at any step)."""
    kind, api_key = kind_and_key
    for path in ID_FIELDS[kind][api_key]:
        body: Any = found
        for step, in_a_list in zip(reversed(path.split(".")), batched):
            body = {step: [body] if in_a_list else body}
        assert list(carried_ids(api_key, body, kind)) == [found]
