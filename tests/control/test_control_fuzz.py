"""Fuzzing the control endpoint: whatever body, path or bytes arrive, the answer is a documented
4xx or a success, never a 500, a hang or a dead server (the server answers /health after each).

Bodies come from two strategies: any JSON value, and rule- or seed-shaped objects whose fields
hold any JSON value, so the fuzz reaches the deep checks as well as the first ones. Integers in
seed bodies are kept small or past Kafka's limits: a seed asking for a billion partitions (within
Kafka's INT32) is honoured, not refused, and would take the broker that long."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafkapy.control.faults_json import ACTION_TYPES, RULE_FIELDS
from kafkapy.control.handlers import ROUTES
from kafkapy.embedded import Broker

from .conftest import HISTORY, ControlClient

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def json_values(small_ints: bool = False) -> st.SearchStrategy[Any]:
    # Past what Kafka's fields carry (INT16/INT32/INT64) and past a float: refused, never a 500.
    beyond = st.sampled_from([2**15, 2**31, 2**63, -(2**63) - 1, 10**400])
    integers = (st.integers(-3, 12) if small_ints else st.integers()) | beyond
    scalars = st.none() | st.booleans() | integers | st.floats(allow_nan=False, allow_infinity=False) | \
        st.text(max_size=20) | st.sampled_from(["PRODUCE", "Fetch", "NOT_LEADER_OR_FOLLOWER", "after"])
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) |
                        st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)


# Rules: plausible values (which make a rule that is installed, then removed) mixed with any JSON.
plausible_actions = st.one_of(
    st.fixed_dictionaries({"type": st.just("error"), "error": st.sampled_from(["NOT_LEADER_OR_FOLLOWER",
                                                                               "policy_violation"])}),
    st.fixed_dictionaries({"type": st.just("delay"), "seconds": st.floats(0, 0.01)}),
    st.fixed_dictionaries({"type": st.just("throttle"), "milliseconds": st.integers(0, 10)}),
    st.fixed_dictionaries({"type": st.just("drop")}, optional={"when": st.sampled_from(["before", "after"])}),
    st.fixed_dictionaries({"type": st.just("truncate")}, optional={"keep": st.floats(0, 0.99)}),
    st.fixed_dictionaries({"type": st.just("stall")}))
any_actions = st.fixed_dictionaries({"type": st.sampled_from(sorted(ACTION_TYPES)) | json_values()},
                                    optional={f: json_values() for f in ("error", "seconds", "milliseconds",
                                                                         "when", "keep", "colour")})
plausible_fields: dict[str, st.SearchStrategy[Any]] = {
    "api": st.sampled_from(["Produce", "FETCH", "metadata"]) |
    st.lists(st.sampled_from(["Produce", "Fetch"])),
    "versions": st.lists(st.integers(0, 15), min_size=2, max_size=2), "client_id": st.text(max_size=5),
    "connection": st.text(max_size=5), "topic": st.sampled_from(["orders", "t"]),
    "partition": st.integers(0, 3), "transactional_id": st.text(max_size=5),
    "group": st.sampled_from(["workers", ""]), "times": st.integers(0, 3), "every": st.integers(0, 3),
    "probability": st.floats(0, 1), "seed": st.integers(), "broker": st.integers(0, 1)}
plausible_rules = st.fixed_dictionaries({"action": plausible_actions}, optional=plausible_fields)
mixed_rules = st.fixed_dictionaries({}, optional={
    **{field: values | json_values() for field, values in plausible_fields.items()},
    "action": plausible_actions | any_actions | json_values()})
rules = plausible_rules | mixed_rules
assert set(plausible_fields) | {"action"} == RULE_FIELDS
records = st.fixed_dictionaries({}, optional={f: json_values(small_ints=True) for f in
                                              ("key", "value", "headers", "partition", "timestamp", "x")})
topics = st.fixed_dictionaries({}, optional={"partitions": st.integers(-1, 4) | json_values(True),
                                             "replication_factor": st.integers(-1, 2) | json_values(True),
                                             "config": st.dictionaries(st.sampled_from(
                                                 ["cleanup.policy", "retention.ms", "nope"]),
                                                 json_values(True), max_size=2) | json_values(True),
                                             "records": st.lists(records, max_size=3) | json_values(True)})
seeds = st.dictionaries(st.sampled_from(["fuzz-a", "fuzz.b", "", "bad name!", "__x"]) | st.text(max_size=8),
                        topics | json_values(True), max_size=2)


@pytest.fixture(scope="module")
def control() -> Iterator[ControlClient]:
    with Broker(HISTORY, control="127.0.0.1:0") as broker:
        assert broker.control is not None
        yield ControlClient(broker.control.url)


def answered(control: ControlClient, method: str, path: str, body: bytes | None) -> int:
    status, raw, _ = control.raw(method, path, body, {"Content-Type": "application/json"})
    assert status < 500, raw
    event(f"{method} {path.split('?')[0][:12]} -> {status}")  # --hypothesis-show-statistics: reached
    answer = json.loads(raw)
    if status >= 400:
        assert set(answer) == {"error", "status"} and answer["status"] == status
        assert answer["error"] and "\n" not in answer["error"]
    return status


@FUZZ
@given(body=rules | json_values())
def test_fault_bodies_never_crash_the_endpoint(control: ControlClient, body: Any) -> None:
    status = answered(control, "POST", "/faults", json.dumps(body).encode())
    if status == 201:
        assert answered(control, "DELETE", "/faults", None) == 200
    assert control.call("GET", "/health")[0] == 200


@FUZZ
@given(body=seeds | json_values(True))
def test_seed_bodies_never_crash_the_endpoint(control: ControlClient, body: Any) -> None:
    answered(control, "POST", "/seed", json.dumps(body).encode())
    assert answered(control, "POST", "/reset", None) == 200


# The routes with a body besides /faults and /seed, and what a body of theirs holds.
BODY_ROUTES = {"/clock/advance": {"seconds": st.floats(0, 1) | json_values()},
               "/topics/orders/partitions/0/leader": {"broker_id": st.integers(-1, 2) | json_values()},
               "/coordinators/unavailable": {"group": st.sampled_from(["g", ""]) | json_values(),
                                             "transactional_id": st.just("t") | json_values(),
                                             "error": st.sampled_from(["NOT_COORDINATOR", "NONE"]) |
                                             json_values()},
               "/groups/g/members/expire": {"member_id": st.just("m") | json_values(),
                                            "client_id": st.just("c") | json_values()}}


# Built once: a flatmap that built them per example (json_values() is a recursive strategy) spent
# more time drawing the bodies than the endpoint spent answering them.
any_json = json_values()
BODY_STRATEGIES = {path: st.fixed_dictionaries({}, optional={**fields, "x": any_json}) | any_json
                   for path, fields in BODY_ROUTES.items()}


@FUZZ
@given(path_and_body=st.sampled_from(sorted(BODY_ROUTES)).flatmap(
    lambda path: st.tuples(st.just(path), BODY_STRATEGIES[path])))
def test_clock_and_cluster_fault_bodies_never_crash_the_endpoint(control: ControlClient,
                                                                 path_and_body: tuple[str, Any]) -> None:
    path, body = path_and_body
    data = json.dumps(body).encode()
    status, raw, _ = control.raw("POST", path, data, {"Content-Type": "application/json"})
    assert status < 500, raw
    if status == 201:  # a coordinator outage: ended again
        assert answered(control, "DELETE", f"/coordinators/unavailable/{json.loads(raw)['id']}", None) == 200
    else:
        answered(control, "POST", path, data)  # the error's shape (the same body again)
    assert control.call("GET", "/health")[0] == 200


@FUZZ
@given(body=st.binary(max_size=64))
def test_bodies_that_are_not_json_are_400(control: ControlClient, body: bytes) -> None:
    try:
        json.loads(body)
    except ValueError:
        assert answered(control, "POST", "/faults", body) == 400


@FUZZ
@given(method=st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD_"]),
       path=st.lists(st.sampled_from(["faults", "1", "x", "snapshots", "restore", "topics", "records",
                                      "cluster", "brokers", "0", "9", "stop", "start", "history", "%2F", "",
                                      "clock", "advance", "partitions", "leader", "coordinators",
                                      "unavailable", "groups", "members", "expire", "offsets",
                                      "coordinator", "transactions", "%C2%B2", "%D9%A3"]),
                     max_size=4).map(lambda parts: "/" + "/".join(parts)),
       query=st.dictionaries(st.sampled_from(["partition", "from_offset", "encoding", "limit", "since",
                                              "broker", "connection"]),
                             st.text("0123456789-.xabase64utf²٣", max_size=6), max_size=3))
def test_any_route_or_query_is_answered_without_a_5xx(control: ControlClient, method: str, path: str,
                                                       query: dict[str, str]) -> None:
    from urllib.parse import urlencode

    if method == "POST" and path.endswith("/stop"):
        return  # a cluster's broker going down is the point of that route, not a fuzz target
    answered(control, method, path + ("?" + urlencode(query) if query else ""), None)
    assert control.call("GET", "/health")[0] == 200


@FUZZ
@given(head=st.binary(max_size=200) | st.builds(
    lambda line, headers: line + b"\r\n" + headers + b"\r\n\r\n",
    st.sampled_from([b"GET /health HTTP/1.1", b"POST /faults HTTP/1.0", b"GET / HTTP/2",
                     b"GET health HTTP/1.1", b"BREW /pot HTCPCP/1.0", b""]),
    st.lists(st.sampled_from([b"Content-Length: 5", b"Content-Length: -1", b"Content-Length: x",
                              b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip", b"Connection: close",
                              b"no colon", b" X: y",
                              b"Content-Length: 99999999999", b"Content-Length: \xb2"]),
                     max_size=3).map(b"\r\n".join)))
def test_raw_bytes_get_a_4xx_or_a_closed_connection_and_the_server_goes_on(control: ControlClient,
                                                                           head: bytes) -> None:
    with socket.create_connection((control.host, control.port), timeout=10) as sock:
        sock.sendall(head)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    for response in received.split(b"HTTP/1.1 ")[1:]:  # kept-alive requests may get several answers
        status = int(response[:3])
        # 501: a transfer coding it does not know, as RFC 9112 6.1 asks; no other 5xx
        assert status < 500 or status == 501, received
    assert control.call("GET", "/health")[0] == 200


# Every route whose path names something ({id}, {index}, {partition}...), but a broker's stop.
TEMPLATED = sorted((r.method, r.path) for r in ROUTES if "{" in r.path and not r.path.endswith("/stop"))
# A path's name: numbers (in other scripts' digits too: int() reads some, str.isdigit passes more), and text.
SEGMENTS = st.sampled_from(["0", "1", "-1", "²", "٣", "¼", "9" * 12, "x", "%", " "]) | \
    st.text(st.characters(blacklist_characters="/?#"), min_size=1, max_size=6)


@FUZZ
@given(route=st.sampled_from(TEMPLATED), names=st.lists(SEGMENTS, min_size=2, max_size=2))
def test_any_name_in_a_routes_path_is_answered_without_a_5xx(control: ControlClient, route: tuple[str, str],
                                                             names: list[str]) -> None:
    from urllib.parse import quote

    method, template = route
    values = iter(names * 2)
    path = re.sub(r"\{[a-z_]+\}", lambda _: quote(next(values), safe=""), template)
    answered(control, method, path, b"{}" if method == "POST" else None)
    assert control.call("GET", "/health")[0] == 200
