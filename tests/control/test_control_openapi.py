"""The OpenAPI document and the endpoint agree: every route documented and every documented
operation served; the document's names (APIs, error codes, actions, rule fields) are the ones
the endpoint accepts; every example request validates against its schema (jsonschema, JSON
Schema 2020-12 as OpenAPI 3.1 uses) and is accepted by a live endpoint, whose answers validate
against the documented responses for their status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from kafkapy.control import ROUTES, openapi_document
from kafkapy.control.faults_json import ACTION_TYPES, RULE_FIELDS
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import api_name
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.clock import VirtualClock

from .conftest import HISTORY, ControlClient

DOCS = Path(__file__).resolve().parents[2] / "docs" / "control-openapi.json"
DOCUMENT_URI = "urn:kafkapy:control-openapi"
METHODS = ("get", "post", "put", "delete", "patch")


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield method.upper(), path, operation


def pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def validator(*parts: str) -> jsonschema.protocols.Validator:
    """A validator for the schema at that place in the document, its $refs resolved in it."""
    registry: Registry[Any] = Registry().with_resource(
        DOCUMENT_URI, Resource.from_contents(openapi_document(), default_specification=DRAFT202012))
    return jsonschema.Draft202012Validator({"$ref": f"{DOCUMENT_URI}#/{pointer(*parts)}"}, registry=registry)


def test_the_docs_copy_is_the_served_document() -> None:
    assert json.loads(DOCS.read_text(encoding="utf-8")) == openapi_document()
    assert openapi_document()["openapi"].startswith("3.1")


def test_every_route_is_documented_and_every_documented_operation_served() -> None:
    served = {(route.method, route.path) for route in ROUTES}
    documented = {(method, path) for method, path, _ in operations(openapi_document())}
    assert served == documented


def test_every_path_parameter_is_declared() -> None:
    for method, path, operation in operations(openapi_document()):
        item = openapi_document()["paths"][path]
        declared = {p["name"] for p in [*item.get("parameters", []), *operation.get("parameters", [])]
                    if p["in"] == "path"}
        in_template = {part[1:-1] for part in path.split("/") if part.startswith("{")}
        assert declared == in_template, f"{method} {path}"


def test_the_documents_names_are_the_ones_the_endpoint_accepts() -> None:
    schemas = openapi_document()["components"]["schemas"]
    assert set(schemas["ApiName"]["enum"]) == {api_name(k) for k in ApiKey} | {k.name for k in ApiKey}
    assert schemas["ErrorName"]["enum"] == [code.name for code in ErrorCode]
    assert [a["properties"]["type"]["const"] for a in schemas["FaultAction"]["oneOf"]] == list(ACTION_TYPES)
    for action in schemas["FaultAction"]["oneOf"]:
        fields, _ = ACTION_TYPES[action["properties"]["type"]["const"]]
        assert set(action["properties"]) - {"type"} == fields
    assert set(schemas["FaultRule"]["properties"]) == RULE_FIELDS


def test_the_component_schemas_are_valid_json_schema() -> None:
    schemas = openapi_document()["components"]["schemas"]
    assert len(schemas) > 10
    for schema in schemas.values():
        jsonschema.Draft202012Validator.check_schema(schema)  # raises SchemaError


def request_examples() -> list[tuple[str, str, str, Any]]:
    found = []
    for method, path, operation in operations(openapi_document()):
        content = operation.get("requestBody", {}).get("content", {}).get("application/json")
        for name, example in (content or {}).get("examples", {}).items():
            found.append((method, path, name, example["value"]))
    return found


@pytest.mark.parametrize(("method", "path", "name", "example"), request_examples())
def test_every_example_request_validates(method: str, path: str, name: str, example: Any) -> None:
    validator("paths", path, method.lower(), "requestBody", "content", "application/json",
              "schema").validate(example)


def test_the_schema_check_can_fail() -> None:
    rule = validator("components", "schemas", "FaultRule")
    with pytest.raises(jsonschema.ValidationError):
        rule.validate({"action": {"type": "error", "error": "NOT_A_CODE"}})
    with pytest.raises(jsonschema.ValidationError):
        rule.validate({"action": {"type": "delay"}})


class Checked:
    """Calls the live endpoint and validates each answer against the documented response."""

    def __init__(self, client: ControlClient) -> None:
        self.client = client
        self.seen: set[tuple[str, str, int]] = set()

    def call(self, method: str, template: str, path: str | None = None, body: Any = None) -> tuple[int, Any]:
        status, answer = self.client.call(method, path or template, body)
        responses = openapi_document()["paths"][template][method.lower()]["responses"]
        assert str(status) in responses, f"{method} {path}: {status} is not documented: {answer}"
        validator("paths", template, method.lower(), "responses", str(status), "content", "application/json",
                  "schema").validate(answer)
        self.seen.add((method, template, status))
        return status, answer


def test_a_live_endpoint_accepts_the_examples_and_answers_as_documented() -> None:
    with Broker(HISTORY, brokers=2, control="127.0.0.1:0") as broker:
        assert broker.control is not None
        checked = Checked(ControlClient(broker.control.url))
        assert checked.call("GET", "/health")[0] == 200
        status, served = checked.call("GET", "/openapi.json")
        assert served == openapi_document()
        for method, path, name, example in request_examples():
            if path == "/faults":
                status, fault = checked.call(method, path, body=example)
                assert status == 201, name
                assert checked.call("GET", "/faults/{id}", f"/faults/{fault['id']}")[0] == 200
            elif path == "/seed":
                assert checked.call(method, path, body=example)[0] == 200, name
            elif path == "/coordinators/unavailable":
                assert checked.call(method, path, body=example)[0] == 201, name
        assert checked.call("GET", "/faults")[0] == 200
        assert checked.call("DELETE", "/faults/{id}", "/faults/1")[0] == 200
        assert checked.call("DELETE", "/faults/{id}", "/faults/1")[0] == 404
        assert checked.call("DELETE", "/faults")[0] == 200
        assert checked.call("GET", "/topics/{topic}/records", "/topics/orders/records")[0] == 200
        assert checked.call("GET", "/topics/{topic}/records", "/topics/orders/records?encoding=x")[0] == 400
        assert checked.call("POST", "/snapshots/{name}", "/snapshots/s")[0] == 201
        assert checked.call("GET", "/snapshots")[0] == 200
        assert checked.call("POST", "/snapshots/{name}/restore", "/snapshots/s/restore")[0] == 200
        assert checked.call("DELETE", "/snapshots/{name}", "/snapshots/s")[0] == 200
        assert checked.call("POST", "/snapshots/{name}/restore", "/snapshots/s/restore")[0] == 404
        assert checked.call("POST", "/reset")[0] == 200
        assert checked.call("GET", "/history", "/history?limit=5")[0] == 200
        assert checked.call("GET", "/cluster")[0] == 200
        assert checked.call("POST", "/cluster/brokers/{index}/stop", "/cluster/brokers/1/stop")[0] == 200
        assert checked.call("POST", "/cluster/brokers/{index}/stop", "/cluster/brokers/0/stop")[0] == 409
        assert checked.call("POST", "/cluster/brokers/{index}/start", "/cluster/brokers/1/start")[0] == 200
        assert checked.call("POST", "/cluster/brokers/{index}/start", "/cluster/brokers/7/start")[0] == 404
        assert checked.call("POST", "/seed", body={"t": {"partitions": -1}})[0] == 400
        check_the_cluster_fault_routes(checked, broker)
    clock = VirtualClock()
    with Broker(clock=clock, control="127.0.0.1:0") as timed:  # the clock's own routes
        assert timed.control is not None
        checked.client = ControlClient(timed.control.url)
        assert checked.call("GET", "/clock")[1] == {"virtual": True, "time": 0, "wall": clock.wall()}
        [(_, _, _, advance)] = [e for e in request_examples() if e[1] == "/clock/advance"]
        status, after = checked.call("POST", "/clock/advance", body=advance)
        assert status == 200 and after["time"] == advance["seconds"]
    exercised = {(method, template) for method, template, _ in checked.seen}
    assert exercised == {(route.method, route.path) for route in ROUTES}


def check_the_cluster_fault_routes(checked: Checked, broker: Broker) -> None:
    """The clock (on real time here), leader moves, coordinator outages and session expiry, on the
    live test's two brokers, after its examples added coordinator outages and POST /reset."""
    status, clock = checked.call("GET", "/clock")
    assert status == 200 and clock["virtual"] is False
    assert checked.call("POST", "/clock/advance", body={"seconds": 1})[0] == 409
    assert checked.call("POST", "/clock/advance", body={"seconds": -1})[0] == 400

    leader = "/topics/{topic}/partitions/{partition}/leader"
    assert checked.call("POST", "/seed", body={"orders": {"partitions": 1}})[0] == 200  # reset before
    [(_, _, _, to_one)] = [e for e in request_examples() if e[1] == leader]
    status, moved = checked.call("POST", leader, "/topics/orders/partitions/0/leader", to_one)
    if status == 409:  # broker 1 led it already (ELECTION_NOT_NEEDED): move it to broker 0
        assert moved["error"].startswith("ELECTION_NOT_NEEDED: ")
        status, moved = checked.call("POST", leader, "/topics/orders/partitions/0/leader", {"broker_id": 0})
    assert status == 200 and moved["leader"] == moved["replicas"][0]
    view = broker.brokers[0].runtime
    assert view is not None
    assert view.cluster.leadership("orders", 0) == (moved["leader"], moved["leader_epoch"])
    again = {"broker_id": moved["leader"]}
    assert checked.call("POST", leader, "/topics/orders/partitions/0/leader", again)[0] == 409
    assert checked.call("POST", leader, "/topics/nowhere/partitions/0/leader", again)[0] == 404
    assert checked.call("POST", leader, "/topics/orders/partitions/x/leader", again)[0] == 400
    status, offsets = checked.call("GET", "/topics/{topic}/offsets", "/topics/orders/offsets")
    assert status == 200 and [o["log_end_offset"] for o in offsets["offsets"]] == [0]
    assert checked.call("GET", "/topics/{topic}/offsets", "/topics/orders/offsets?partition=3")[0] == 404
    assert checked.call("GET", "/topics/{topic}/offsets", "/topics/orders/offsets?partition=x")[0] == 400
    # No group or transactional id has a coordinator yet (test_control_eos.py moves real ones).
    for template, path in (("/groups/{group}/coordinator", "/groups/workers/coordinator"),
                           ("/transactions/{id}/coordinator", "/transactions/t1/coordinator")):
        status, refused = checked.call("POST", template, path, {"broker_id": 1})
        assert status == 409 and refused["error"].startswith("COORDINATOR_NOT_AVAILABLE: ")
        assert checked.call("POST", template, path, {"broker_id": "1"})[0] == 400

    status, listed = checked.call("GET", "/coordinators/unavailable")
    # The examples' outages, ended by the POST /reset above, are listed until DELETEd.
    assert status == 200 and [o["active"] for o in listed["outages"]] == [False, False]
    status, added = checked.call("POST", "/coordinators/unavailable", body={"group": "workers"})
    assert status == 201 and added["active"] is True
    assert checked.call("GET", "/coordinators/unavailable")[1]["outages"][-1] == added
    outage = f"/coordinators/unavailable/{added['id']}"
    assert checked.call("DELETE", "/coordinators/unavailable/{id}", outage)[1]["active"] is False
    assert checked.call("DELETE", "/coordinators/unavailable/{id}", outage)[0] == 404
    assert checked.call("POST", "/coordinators/unavailable", body={"group": "g", "error": "NONE"})[0] == 400

    expire = "/groups/{group}/members/expire"
    [(_, _, _, by_client)] = [e for e in request_examples() if e[1] == expire]
    # No group has been coordinated yet (no __consumer_offsets): "nobody" is not there.
    status, refused = checked.call("POST", expire, "/groups/nobody/members/expire", by_client)
    assert status == 404 and refused["error"].startswith("GROUP_ID_NOT_FOUND: ")
    assert checked.call("POST", expire, "/groups/nobody/members/expire", {})[0] == 400

    # The coordinators' views: none yet (test_control_coordinators.py reads real ones).
    assert checked.call("GET", "/groups") == (200, {"groups": []})
    assert checked.call("GET", "/groups/{group}", "/groups/nobody")[0] == 404
    assert checked.call("GET", "/transactions") == (200, {"transactions": []})
    assert checked.call("GET", "/transactions/{id}", "/transactions/nobody")[0] == 404
