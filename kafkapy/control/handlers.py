"""The control endpoint's handlers and its routing table, ``ROUTES``.

Each handler does what one Broker method does (kafkapy.control.target), on the broker's loop:
the endpoint is a second door to the Python test surface, never a second implementation. What
only the endpoint needs is kept in ``ControlApi``: the fault rules it added (by id, since a
JSON client cannot hold a FaultHandle) and the snapshots it took (by name).

On a cluster a fault rule goes to every running broker unless it names one (``"broker": i``):
a client's request may reach any of them. Each broker counts for itself (``times``, ``every``, the
RNG), and the counts shown are the sums over those brokers. A broker stopped and started again
comes back without the rules (its faults are its runtime's).
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import math
import time
from collections.abc import Collection, Mapping
from http import HTTPStatus
from typing import Any

import attrs

from kafkapy.control.coordinators_json import view_json
from kafkapy.control.errors import ControlError
from kafkapy.control.faults_json import fault_rule, rule_json
from kafkapy.control.records_json import ENCODINGS, record_json
from kafkapy.control.routes import Call, Reply, Route
from kafkapy.control.target import ControlMember, ControlTarget
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.faults import CoordinatorOutage, RuleHandle
from kafkapy.faults.cluster import LeaderMove
from kafkapy.inspection import Isolation
from kafkapy.observers.history import HistoryEntry
from kafkapy.seeding import SeedError, parse_seed, parse_seed_text
from kafkapy.server.coordinator_outages import OUTAGE_ERRORS

__all__ = ["ROUTES", "ControlApi", "ControlFault"]

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


@attrs.define
class ControlFault:
    """A rule the endpoint added, with its handle on each broker it went to."""

    id: int
    rule: dict[str, Any]  # as fault_rule read it, in rule_json's shape
    handles: list[tuple[int, RuleHandle]]  # (broker index, handle)

    def json(self) -> dict[str, Any]:
        return {"id": self.id, "rule": self.rule, "brokers": [index for index, _ in self.handles],
                "matched": sum(h.matched for _, h in self.handles),
                "fired": sum(h.fired for _, h in self.handles),
                "active": any(not h.removed for _, h in self.handles)}

    def remove(self) -> None:
        for _, handle in self.handles:
            handle.remove()


class ControlApi:
    """What the handlers share: the broker, the faults and snapshots held by name, the document."""

    def __init__(self, target: ControlTarget, document: Mapping[str, Any]) -> None:
        self.target = target
        self.document = document
        self.faults: dict[int, ControlFault] = {}
        self.snapshots: dict[str, Any] = {}
        self.outages: dict[int, CoordinatorOutage] = {}  # the coordinator outages added here, by id
        self._ids = itertools.count(1)
        self._outage_ids = itertools.count(1)

    def next_fault_id(self) -> int:
        return next(self._ids)

    def next_outage_id(self) -> int:
        return next(self._outage_ids)

    def running(self) -> list[tuple[int, ControlMember]]:
        return [(i, m) for i, m in enumerate(self.target.brokers) if m.runtime is not None]

    def member(self, text: str) -> tuple[int, ControlMember]:
        brokers = self.target.brokers
        if not text.isdecimal() or int(text) >= len(brokers):
            raise ControlError(f"no broker index {text!r}: this cluster has brokers 0-{len(brokers) - 1}",
                               HTTPStatus.NOT_FOUND)
        return int(text), brokers[int(text)]


# --- health and the document -------------------------------------------------------------------

async def health(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, {"status": "ok", "cluster": api.target.is_cluster,
                           "brokers": len(api.target.brokers), "running": len(api.running())}


async def openapi(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, api.document


# --- faults ------------------------------------------------------------------------------------

async def list_faults(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, {"faults": [fault.json() for fault in api.faults.values()]}


async def add_fault(api: ControlApi, call: Call) -> Reply:
    raw = call.json()
    rule = fault_rule(raw)
    index = raw.get("broker")
    if index is None:
        targets = api.running()
    else:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ControlError(f"broker: expected a broker index, not {index!r}")
        found = api.member(str(index))
        if found[1].runtime is None:
            raise ControlError(f"broker {index} is down: start it first", HTTPStatus.CONFLICT)
        targets = [found]
    fault = ControlFault(api.next_fault_id(), rule_json(rule),
                         [(i, member.faults.add(rule)) for i, member in targets])
    api.faults[fault.id] = fault
    return HTTPStatus.CREATED, fault.json()


def _fault(api: ControlApi, call: Call) -> ControlFault:
    text = call.params["id"]
    fault = api.faults.get(int(text)) if text.isdecimal() else None
    if fault is None:
        raise ControlError(f"no fault rule {text!r} (GET /faults lists them)", HTTPStatus.NOT_FOUND)
    return fault


async def get_fault(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, _fault(api, call).json()


async def remove_fault(api: ControlApi, call: Call) -> Reply:
    fault = _fault(api, call)
    fault.remove()
    del api.faults[fault.id]
    return HTTPStatus.OK, fault.json()


async def remove_all_faults(api: ControlApi, call: Call) -> Reply:
    """Every rule on every running broker, those added from Python too."""
    removed = [fault.json() for fault in api.faults.values()]
    for fault in api.faults.values():
        fault.remove()
    api.faults.clear()
    for _, member in api.running():
        member.faults.clear()
    return HTTPStatus.OK, {"removed": removed}


# --- seeding, snapshots, reset -----------------------------------------------------------------

async def seed(api: ControlApi, call: Call) -> Reply:
    content_type = call.request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if content_type in YAML_TYPES and importlib.util.find_spec("yaml") is None:
        raise ControlError("YAML seed data needs PyYAML installed beside kafkapy (pip install pyyaml); "
                           "send JSON instead", HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
    try:
        if content_type in YAML_TYPES:
            topics = parse_seed_text(call.request.body.decode("utf-8", "replace"), yaml=True, source="body")
        else:
            topics = parse_seed(call.json())
        await api.target.seed_async(topics)
    except SeedError as exc:
        raise ControlError(str(exc)) from None
    return HTTPStatus.OK, {"seeded": [topic.name for topic in topics],
                           "records": sum(len(topic.records) for topic in topics)}


async def reset(api: ControlApi, call: Call) -> Reply:
    await api.target.reset_async()
    return HTTPStatus.OK, {"reset": True}


def _snapshot_json(name: str, snapshot: Any) -> dict[str, Any]:
    return {"name": name, "topics": sorted(snapshot.topics), "groups": sorted(snapshot.offsets),
            "records": sum(len(topic["records"]) for topic in snapshot.topics.values())}


async def list_snapshots(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, {"snapshots": [_snapshot_json(n, s) for n, s in api.snapshots.items()]}


async def take_snapshot(api: ControlApi, call: Call) -> Reply:
    name = call.params["name"]
    api.snapshots[name] = api.target.snapshot()
    return HTTPStatus.CREATED, _snapshot_json(name, api.snapshots[name])


def _snapshot(api: ControlApi, call: Call) -> tuple[str, Any]:
    name = call.params["name"]
    if name not in api.snapshots:
        raise ControlError(f"no snapshot {name!r} (GET /snapshots lists them)", HTTPStatus.NOT_FOUND)
    return name, api.snapshots[name]


async def restore_snapshot(api: ControlApi, call: Call) -> Reply:
    name, snapshot = _snapshot(api, call)
    try:
        await api.target.restore_async(snapshot)
    except SeedError as exc:
        raise ControlError(str(exc), HTTPStatus.CONFLICT) from None
    return HTTPStatus.OK, _snapshot_json(name, snapshot)


async def delete_snapshot(api: ControlApi, call: Call) -> Reply:
    name, snapshot = _snapshot(api, call)
    del api.snapshots[name]
    return HTTPStatus.OK, _snapshot_json(name, snapshot)


# --- inspection --------------------------------------------------------------------------------

async def records(api: ControlApi, call: Call) -> Reply:
    encoding = call.request.query.get("encoding", "utf-8")
    if encoding not in ENCODINGS:
        raise ControlError(f"query encoding: expected one of {', '.join(ENCODINGS)}, not {encoding!r}")
    try:
        isolation = Isolation.of(call.request.query.get("isolation", Isolation.LOG.value))
    except ValueError as exc:
        raise ControlError(f"query {exc}") from None
    try:
        found = api.target.records(call.params["topic"], call.query_int("partition"),
                                   call.query_int("from_offset", 0) or 0, isolation=isolation)
    except KafkaApiError as exc:  # a partition the topic has not
        raise _refused(exc) from None
    return HTTPStatus.OK, {"records": [record_json(record, encoding) for record in found]}


async def log_offsets(api: ControlApi, call: Call) -> Reply:
    """``broker.log_offsets()``: each partition's log start, last stable offset, high watermark,
    log end and aborted transactions."""
    try:
        found = api.target.log_offsets(call.params["topic"], call.query_int("partition"))
    except KafkaApiError as exc:  # a partition the topic has not
        raise _refused(exc) from None
    return HTTPStatus.OK, {"offsets": [view_json(offsets) for offsets in found]}


def _entry_json(index: int, entry: HistoryEntry) -> dict[str, Any]:
    code = entry.error_code
    return {"broker": index, "connection": entry.connection,
            "client_address": f"{entry.client_address[0]}:{entry.client_address[1]}",
            "client_id": entry.client_id, "api_key": entry.api_key, "api": entry.api_name,
            "api_version": entry.api_version, "correlation_id": entry.correlation_id, "time": entry.time,
            "answered": entry.answered, "error_code": code,
            "error": None if code is None else
            ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"}


async def history(api: ControlApi, call: Call) -> Reply:
    query = call.request.query
    since_text = query.get("since")
    try:
        since = None if since_text is None else float(since_text)
    except ValueError:
        raise ControlError(f"query since: expected a time in seconds since the epoch, not {since_text!r}") \
            from None
    members = [api.member(query["broker"])] if "broker" in query else api.running()
    entries: list[tuple[int, HistoryEntry]] = []
    for index, member in members:
        try:
            seen = member.history(connection=query.get("connection"), client_id=query.get("client_id"),
                                  since=since)
        except RuntimeError as exc:  # no RequestHistory observer, or the broker is down
            raise ControlError(str(exc), HTTPStatus.CONFLICT) from None
        entries += [(index, entry) for entry in seen]
    entries.sort(key=lambda pair: pair[1].time)
    limit = call.query_int("limit", low=1)
    if limit is not None:
        entries = entries[-limit:]  # the most recent: the end of the story
    return HTTPStatus.OK, {"history": [_entry_json(index, entry) for index, entry in entries]}


# --- the cluster -------------------------------------------------------------------------------

def _cluster_json(api: ControlApi) -> dict[str, Any]:
    return {"cluster": api.target.is_cluster,
            "bootstrap_servers": ",".join(m.bootstrap_servers for _, m in api.running()),
            "brokers": [{"index": i, "broker_id": m.broker_id, "running": m.runtime is not None,
                         "bootstrap_servers": m.bootstrap_servers if m.runtime is not None else None}
                        for i, m in enumerate(api.target.brokers)]}


async def cluster(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, _cluster_json(api)


async def stop_broker(api: ControlApi, call: Call) -> Reply:
    index, member = api.member(call.params["index"])
    if not api.target.is_cluster:
        raise ControlError("a single broker is not stopped through its own endpoint; serve a cluster "
                           "(--brokers N) to take brokers down and up", HTTPStatus.CONFLICT)
    if member.runtime is not None and len(api.running()) == 1:
        raise ControlError(f"broker {index} is the last one running", HTTPStatus.CONFLICT)
    await api.target.stop_broker_async(index)
    return HTTPStatus.OK, _cluster_json(api)


async def start_broker(api: ControlApi, call: Call) -> Reply:
    index, _ = api.member(call.params["index"])
    await api.target.start_broker_async(index)
    return HTTPStatus.OK, _cluster_json(api)


# --- the clock ---------------------------------------------------------------------------------

def _clock_json(api: ControlApi) -> dict[str, Any]:
    clock = api.target.clock
    if clock is None:  # real time: the loop's monotonic seconds and the epoch
        return {"virtual": False, "time": asyncio.get_running_loop().time(), "wall": time.time()}
    return {"virtual": True, "time": clock.time(), "wall": clock.wall()}


async def get_clock(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, _clock_json(api)


async def advance_clock(api: ControlApi, call: Call) -> Reply:
    """On the clock's loop, the broker's, as ``advance_async`` asks: answered once what fell due ran."""
    body = _object(call.json(), {"seconds"}, required={"seconds"})
    given = body["seconds"]
    try:
        seconds = -1.0 if isinstance(given, bool) or not isinstance(given, int | float) else float(given)
    except OverflowError:  # an integer past a float's range
        seconds = math.inf
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ControlError(f"seconds: expected a number of seconds, 0 or more, not {given!r}")
    clock = api.target.clock
    if clock is None:
        raise ControlError("the broker runs on real time, which moves by itself: start it on a virtual "
                           "clock (kafkapy serve --virtual-clock, Broker(clock=VirtualClock()))",
                           HTTPStatus.CONFLICT)
    await clock.advance_async(seconds)
    return HTTPStatus.OK, _clock_json(api)


# --- cluster faults: leaders, coordinators, sessions ---------------------------------------------

# A broker's refusal as HTTP: what names something that does not exist is a 404, the rest is the
# brokers' state refusing (409). The message keeps Kafka's error name first.
_MISSING = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND,
                      ErrorCode.UNKNOWN_MEMBER_ID})


def _refused(exc: KafkaApiError) -> ControlError:
    return ControlError(str(exc), HTTPStatus.NOT_FOUND if exc.code in _MISSING else HTTPStatus.CONFLICT)


def _object(raw: Any, fields: Collection[str], *, required: Collection[str] = ()) -> dict[str, Any]:
    """``raw`` as a JSON object of only ``fields``, with every one of ``required``."""
    if not isinstance(raw, dict):
        raise ControlError(f"expected a JSON object, not {type(raw).__name__}")
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ControlError(f"unknown field {unknown[0]!r}; expected {', '.join(sorted(fields))}")
    missing = sorted(set(required) - set(raw))
    if missing:
        raise ControlError(f"{missing[0]}: required")
    return raw


def _text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ControlError(f"{name}: expected a string, not {value!r}")
    return value


def _broker_id(call: Call) -> int:
    to = _object(call.json(), {"broker_id"}, required={"broker_id"})["broker_id"]
    if isinstance(to, bool) or not isinstance(to, int):
        raise ControlError(f"broker_id: expected a broker id, not {to!r}")
    return to


def _move_json(moved: LeaderMove) -> dict[str, Any]:
    return {**attrs.asdict(moved), "replicas": list(moved.replicas)}


async def _move_coordinator(api: ControlApi, to: int, *, transactional_id: str | None = None,
                            group: str | None = None) -> Reply:
    try:
        moved = await api.target.move_coordinator_async(transactional_id=transactional_id, group=group, to=to)
    except KafkaApiError as exc:
        raise _refused(exc) from None
    return HTTPStatus.OK, _move_json(moved)


async def move_transaction_coordinator(api: ControlApi, call: Call) -> Reply:
    return await _move_coordinator(api, _broker_id(call), transactional_id=call.params["id"])


async def move_group_coordinator(api: ControlApi, call: Call) -> Reply:
    return await _move_coordinator(api, _broker_id(call), group=call.params["group"])


async def move_leader(api: ControlApi, call: Call) -> Reply:
    text = call.params["partition"]
    if not text.isdecimal() or len(text) > 10:
        raise ControlError(f"partition: expected a partition number, not {text!r}")
    to = _broker_id(call)
    try:
        moved = await api.target.move_leader_async(call.params["topic"], int(text), to=to)
    except KafkaApiError as exc:
        raise _refused(exc) from None
    return HTTPStatus.OK, _move_json(moved)


def _outage_json(outage_id: int, outage: CoordinatorOutage) -> dict[str, Any]:
    return {"id": outage_id, "group": outage.group_id, "transactional_id": outage.transactional_id,
            "error": outage.error.name, "active": not outage.removed}


async def add_outage(api: ControlApi, call: Call) -> Reply:
    body = _object(call.json(), {"group", "transactional_id", "error"})
    group, transactional_id = _text(body, "group"), _text(body, "transactional_id")
    if group is None and transactional_id is None:
        raise ControlError("give group, transactional_id or both: the coordinator to cut off")
    name = body.get("error", ErrorCode.COORDINATOR_NOT_AVAILABLE.name)
    error = ErrorCode.__members__.get(name.upper()) if isinstance(name, str) else None
    if error not in OUTAGE_ERRORS:
        raise ControlError(f"error: expected one of {', '.join(code.name for code in OUTAGE_ERRORS)}, "
                           f"not {name!r}")
    outage = api.target.coordinator_unavailable(group=group, transactional_id=transactional_id, error=error)
    outage_id = api.next_outage_id()
    api.outages[outage_id] = outage
    return HTTPStatus.CREATED, _outage_json(outage_id, outage)


async def list_outages(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, {"outages": [_outage_json(i, o) for i, o in api.outages.items()]}


async def remove_outage(api: ControlApi, call: Call) -> Reply:
    text = call.params["id"]
    outage = api.outages.pop(int(text), None) if text.isdecimal() else None
    if outage is None:
        raise ControlError(f"no coordinator outage {text!r} (GET /coordinators/unavailable lists them)",
                           HTTPStatus.NOT_FOUND)
    outage.remove()
    return HTTPStatus.OK, _outage_json(int(text), outage)


async def expire_members(api: ControlApi, call: Call) -> Reply:
    body = _object(call.json(), {"member_id", "client_id"})
    member_id, client_id = _text(body, "member_id"), _text(body, "client_id")
    if (member_id is None) == (client_id is None):
        raise ControlError("give member_id or client_id (one of them): whose session ends")
    try:
        expired = await api.target.expire_session_async(call.params["group"], member_id=member_id,
                                                        client_id=client_id)
    except KafkaApiError as exc:
        raise _refused(exc) from None
    return HTTPStatus.OK, {"group": call.params["group"], "expired": expired}


# --- the coordinators' state: groups and transactions --------------------------------------------

async def list_groups(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, {"groups": [view_json(view) for view in api.target.groups()]}


async def get_group(api: ControlApi, call: Call) -> Reply:
    view = api.target.group(call.params["group"])
    if view is None:
        raise ControlError(f"no group {call.params['group']!r} is known to a coordinator "
                           "(GET /groups lists them)", HTTPStatus.NOT_FOUND)
    return HTTPStatus.OK, view_json(view)


async def list_transactions(api: ControlApi, call: Call) -> Reply:
    return HTTPStatus.OK, {"transactions": [view_json(view) for view in api.target.transactions()]}


async def get_transaction(api: ControlApi, call: Call) -> Reply:
    view = api.target.transaction(call.params["id"])
    if view is None:
        raise ControlError(f"no transactional id {call.params['id']!r} is known to a coordinator "
                           "(GET /transactions lists them)", HTTPStatus.NOT_FOUND)
    return HTTPStatus.OK, view_json(view)


# The routing table (kafkapy.control.routes): one entry per operation of openapi.json.
ROUTES: tuple[Route[ControlApi], ...] = (
    Route("GET", "/health", health, "whether the endpoint answers, and how many brokers run"),
    Route("GET", "/openapi.json", openapi, "this API's OpenAPI 3.1 description"),
    Route("GET", "/faults", list_faults, "the fault rules added here, with their counts"),
    Route("POST", "/faults", add_fault, "add a fault rule"),
    Route("DELETE", "/faults", remove_all_faults, "remove every fault rule"),
    Route("GET", "/faults/{id}", get_fault, "one fault rule and its counts"),
    Route("DELETE", "/faults/{id}", remove_fault, "remove one fault rule"),
    Route("POST", "/seed", seed, "create topics and append records (the --seed shape)"),
    Route("POST", "/reset", reset, "delete every topic and empty group"),
    Route("GET", "/snapshots", list_snapshots, "the snapshots held"),
    Route("POST", "/snapshots/{name}", take_snapshot, "snapshot topics and offsets under a name"),
    Route("DELETE", "/snapshots/{name}", delete_snapshot, "forget a snapshot"),
    Route("POST", "/snapshots/{name}/restore", restore_snapshot, "reset, then restore a snapshot"),
    Route("GET", "/topics/{topic}/records", records, "the records a topic's logs hold"),
    Route("GET", "/topics/{topic}/offsets", log_offsets,
          "where the topic's logs stand: log start, last stable offset, high watermark, log end"),
    Route("GET", "/history", history, "the requests the brokers saw"),
    Route("GET", "/cluster", cluster, "the brokers, running or not"),
    Route("POST", "/cluster/brokers/{index}/stop", stop_broker, "take a broker down"),
    Route("POST", "/cluster/brokers/{index}/start", start_broker, "bring a broker back"),
    Route("GET", "/clock", get_clock, "the broker's clock: virtual or real, and where it stands"),
    Route("POST", "/clock/advance", advance_clock, "move a virtual clock on, firing what falls due"),
    Route("POST", "/topics/{topic}/partitions/{partition}/leader", move_leader,
          "make a broker the partition's leader"),
    Route("GET", "/coordinators/unavailable", list_outages, "the coordinator outages added here"),
    Route("POST", "/coordinators/unavailable", add_outage,
          "cut off the coordinator of a group or a transactional id"),
    Route("DELETE", "/coordinators/unavailable/{id}", remove_outage, "end a coordinator outage"),
    Route("POST", "/groups/{group}/members/expire", expire_members, "end members' sessions now"),
    Route("POST", "/groups/{group}/coordinator", move_group_coordinator,
          "make a broker the group's coordinator"),
    Route("POST", "/transactions/{id}/coordinator", move_transaction_coordinator,
          "make a broker the transactional id's coordinator"),
    Route("GET", "/groups", list_groups, "every group the coordinators hold"),
    Route("GET", "/groups/{group}", get_group, "one group: members, assignments, offsets"),
    Route("GET", "/transactions", list_transactions, "every transactional id the coordinators hold"),
    Route("GET", "/transactions/{id}", get_transaction, "one transactional id's state"),
)
