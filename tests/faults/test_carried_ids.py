"""The table of which request fields carry group ids and transactional ids
(kafkapy.faults.carried_ids), held to Kafka's request specs: every path it lists exists, every
field of those names is in it, and each id set in a request of every version is read back from
the request as the broker decodes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.faults import ApiKey, Delay, ErrorAnswer, ErrorCode, FaultRule
from kafkapy.faults.carried_ids import FIND_COORDINATOR_KEYS, ID_FIELDS, IdKind, carried_ids
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.catalogue import catalogue
from kafkapy.protocol.codec import decode_request, encode_request
from kafkapy.protocol.specs import FieldSpec

GROUP_KEY, TRANSACTION_KEY = CoordinatorKeyType.GROUP, CoordinatorKeyType.TRANSACTION
# The names Kafka's specs give an id field (DescribeGroups' array of group ids is "groups").
ID_NAMES = {IdKind.TRANSACTION: {"transactional_id", "transactional_ids", "v3_and_below_transactional_id"},
            IdKind.GROUP: {"group_id", "group_ids", "groups_names"}}


def walk(fields: tuple[FieldSpec, ...], path: tuple[str, ...] = ()) -> Iterator[tuple[str, FieldSpec]]:
    for field in fields:
        dotted = ".".join((*path, field.snake))
        yield dotted, field
        if field.fields:
            yield from walk(field.fields, (*path, field.snake))


def spec_fields(api_key: int) -> dict[str, FieldSpec]:
    return dict(walk(catalogue()[api_key].request.fields))


@pytest.mark.parametrize("kind", list(IdKind))
def test_every_id_field_of_the_specs_is_in_the_table_and_every_path_exists(kind: IdKind) -> None:
    found = set()
    for api_key in catalogue():
        for dotted, field in spec_fields(api_key).items():
            name = dotted.rsplit(".", 1)[-1]
            described = kind is IdKind.GROUP and name == "groups" and field.type == "[]string"
            if name in ID_NAMES[kind] or described:
                found.add((api_key, dotted))
    listed = {(int(api), path) for api, paths in ID_FIELDS[kind].items() for path in paths}
    assert listed == found
    assert len(listed) >= (8 if kind is IdKind.TRANSACTION else 29)


def versions(api_key: int) -> range:
    spec = catalogue()[api_key]
    return range(spec.min_version, spec.max_version + 1)


def body_with(api_key: int, version: int, path: str, value: str) -> dict[str, Any] | None:
    """A request body of that version with ``value`` at ``path`` (None: the version lacks it)."""
    fields = catalogue()[api_key].request.fields
    steps = path.split(".")
    for step in steps:
        field = next((f for f in fields if f.snake == step), None)
        if field is None or version not in field.versions:
            return None
        fields = field.fields or ()
    leaf: Any = [value] if field.type == "[]string" else value
    for step in reversed(steps[1:]):
        leaf = [{step: leaf}]
    return {steps[0]: leaf}


def decoded(api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    request = decode_request(encode_request(api_key, version, 7, "client", body))
    return dict(request.body)


@pytest.mark.parametrize("kind", list(IdKind))
def test_an_id_at_each_path_is_read_back_in_every_version(kind: IdKind) -> None:
    checked = 0
    other = IdKind.GROUP if kind is IdKind.TRANSACTION else IdKind.TRANSACTION
    for api_key, paths in ID_FIELDS[kind].items():
        for version in versions(api_key):
            present = [body for path in paths
                       if (body := body_with(api_key, version, path, "the-id")) is not None]
            if api_key != ApiKey.PRODUCE:  # Produce carries a transactional id from v3 on
                assert present, f"{api_key.name} v{version} has none of {paths}"
            for body in present:
                seen = decoded(api_key, version, body)
                assert list(carried_ids(api_key, seen, kind)) == ["the-id"], (api_key.name, version, body)
                assert "the-id" not in carried_ids(api_key, seen, other)
                checked += 1
    assert checked > (40 if kind is IdKind.TRANSACTION else 90)


@pytest.mark.parametrize("kind", list(IdKind))
def test_find_coordinator_keys_count_for_the_key_type_they_are(kind: IdKind) -> None:
    key_type = CoordinatorKeyType.GROUP if kind is IdKind.GROUP else CoordinatorKeyType.TRANSACTION
    for version in versions(ApiKey.FIND_COORDINATOR):
        for path in FIND_COORDINATOR_KEYS:
            body = body_with(ApiKey.FIND_COORDINATOR, version, path, "the-id")
            if body is None:
                continue
            if version >= 1:
                body["key_type"] = key_type
            elif kind is IdKind.TRANSACTION:
                continue  # v0 knows groups only
            seen = decoded(ApiKey.FIND_COORDINATOR, version, body)
            assert list(carried_ids(ApiKey.FIND_COORDINATOR, seen, kind)) == ["the-id"]
            if version >= 1:
                seen["key_type"] = CoordinatorKeyType.SHARE
                assert list(carried_ids(ApiKey.FIND_COORDINATOR, seen, kind)) == []


def test_an_api_that_carries_no_id_carries_none() -> None:
    assert list(carried_ids(ApiKey.FETCH, {"group_id": "x", "transactional_id": "y"}, IdKind.GROUP)) == []
    assert list(carried_ids(9999, {"group_id": "x"}, IdKind.GROUP)) == []


def test_a_rule_checks_its_id_criteria_where_it_is_built() -> None:
    action = ErrorAnswer(ErrorCode.NOT_COORDINATOR)
    with pytest.raises(TypeError, match=r"^transactional_id takes the id as text, such as .*, not 5$"):
        FaultRule(action, transactional_id=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^group takes the id as text"):
        FaultRule(action, group=["workers"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^group: no request of FETCH, PRODUCE carries one"):
        FaultRule(action, api={ApiKey.PRODUCE, ApiKey.FETCH}, group="workers")
    with pytest.raises(TypeError, match="unexpected keyword argument 'group_id'"):
        FaultRule(action, group_id="workers")  # type: ignore[call-arg]
    both = FaultRule(Delay(0), api=[ApiKey.TXN_OFFSET_COMMIT, ApiKey.PRODUCE], transactional_id="t",
                     group="g")
    assert both.group == "g" and both.transactional_id == "t"


def test_a_broker_matches_the_id_in_each_versions_field_and_in_batches() -> None:
    """Through a running broker's injector: the single-id form and the batched form of OffsetFetch
    (v7, v8+), AddPartitionsToTxn (v3, v4+) and FindCoordinator (v3, v4+), and a FindCoordinator
    key of the other key type, which does not match."""
    from kafkapy.client import SimpleClient
    from kafkapy.embedded import Broker

    with Broker() as broker, SimpleClient(broker.bootstrap_servers) as client:
        group = broker.faults.add(FaultRule(Delay(0), group="workers"))
        txn = broker.faults.add(FaultRule(Delay(0), transactional_id="payments"))
        sent = [
            (ApiKey.OFFSET_FETCH, 7, {"group_id": "others", "topics": None}, (0, 0)),
            (ApiKey.OFFSET_FETCH, 7, {"group_id": "workers", "topics": None}, (1, 0)),
            (ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "others"}, {"group_id": "workers"}]}, (2, 0)),
            (ApiKey.FIND_COORDINATOR, 3, {"key": "payments", "key_type": GROUP_KEY}, (2, 0)),
            (ApiKey.FIND_COORDINATOR, 3, {"key": "payments", "key_type": TRANSACTION_KEY}, (2, 1)),
            (ApiKey.FIND_COORDINATOR, 4, {"coordinator_keys": ["x", "workers"], "key_type": GROUP_KEY},
             (3, 1)),
            (ApiKey.ADD_PARTITIONS_TO_TXN, 3, {"v3_and_below_transactional_id": "payments",
                                               "v3_and_below_topics": []}, (3, 2)),
            (ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [
                {"transactional_id": "billing", "topics": []},
                {"transactional_id": "payments", "topics": []}]}, (3, 3)),
        ]
        for api, version, body, (groups_matched, transactions_matched) in sent:
            client.request(api, version, body)
            assert (group.matched, txn.matched) == (groups_matched, transactions_matched), (api.name, version)
