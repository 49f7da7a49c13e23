"""The strict-mode interceptor: reads requests and the answers they get, and records misuse.

It never changes an answer: ``before`` stamps the request (arrival order, for "was the client told
before it sent this?") and notes produced batches; ``after`` (and the ``refused`` and ``unrouted``
notices, kafkapy.server.interceptors) hands what the coordinator and the producer state answered
to the watches (kafkapy.strict.groups, kafkapy.strict.sequences), which say whether it was
misuse. Installed first, it is the outermost interceptor, so it sees the answer that is sent.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kafkapy.errors import DecodeError, ErrorCode, KafkaApiError
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import RecordBatch
from kafkapy.server.interceptors import PASS, Interceptor, Pass
from kafkapy.server.modules import Answer, ChunkedResponse, EncodedResponse
from kafkapy.strict.groups import CONSUMER_PROTOCOL_TYPE, STALE_CODES, GroupWatch, assigned_partitions
from kafkapy.strict.sequences import BatchSequences, SequenceWatch
from kafkapy.strict.violations import MAGIC_AT, Violation, ViolationKind, Violations, request_summary

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.modules import RequestContext

__all__ = ["StrictInterceptor"]

TopicPartition = tuple[str, int]
_STAMP = "strict.stamp"  # ConnectionInfo.attributes: the stamp of the request in hand
_MAGIC_V2 = 2
# The field that carries a member's generation (or KIP-848 epoch), per API.
_GENERATION_FIELD = {ApiKey.HEARTBEAT: "generation_id", ApiKey.SYNC_GROUP: "generation_id",
                     ApiKey.OFFSET_COMMIT: "generation_id_or_member_epoch",
                     ApiKey.TXN_OFFSET_COMMIT: "generation_id",
                     ApiKey.CONSUMER_GROUP_HEARTBEAT: "member_epoch"}
_COMMITS = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT})


class StrictInterceptor(Interceptor):
    def __init__(self, violations: Violations, served_versions: Callable[[], Mapping[int, tuple[int, int]]],
                 topic_name: Callable[[uuid.UUID], str | None],
                 recorded: Callable[[Violation], None] = lambda violation: None) -> None:
        self.violations = violations
        self.recorded = recorded  # told of each violation as it is recorded (the module logs it)
        self.served_versions = served_versions
        self.topic_name = topic_name
        self.groups = GroupWatch()
        self.sequences = SequenceWatch()
        self._stamps = itertools.count(1)

    # --- the seam -------------------------------------------------------------------------

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        stamp = context.connection.attributes[_STAMP] = next(self._stamps)
        if context.api_key == ApiKey.PRODUCE:
            for partition, batch in self._batches(context, request.body):
                self.sequences.sent(stamp, partition, batch)
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        key = context.api_key
        if key == ApiKey.PRODUCE:
            self._produced(context, request, answer)
            return answer
        body = answer.body if isinstance(answer, (EncodedResponse, ChunkedResponse)) else answer
        if body is None or key not in _WATCHED:
            return answer
        self._judge_stale(context, request, _codes(body))
        if key == ApiKey.JOIN_GROUP and body["error_code"] == ErrorCode.NONE:
            self.groups.joined(request.body["group_id"], body["member_id"], body["generation_id"])
        elif key == ApiKey.SYNC_GROUP and body["error_code"] == ErrorCode.NONE:
            self._synced(request.body, body)
        elif key == ApiKey.CONSUMER_GROUP_HEARTBEAT and body["error_code"] == ErrorCode.NONE:
            self._heartbeat(request.body, body)
        elif key in _COMMITS:
            self._judge_commit(context, request, body)
        return answer

    def refused(self, context: RequestContext, request: Request, refusal: KafkaApiError) -> None:
        if context.api_key == ApiKey.PRODUCE:
            for partition, batch in self._batches(context, request.body):
                self.sequences.dropped(self._stamp(context), partition, batch)
        elif context.api_key in _WATCHED:
            self._judge_stale(context, request, {refusal.code})
        if refusal.code == ErrorCode.UNSUPPORTED_VERSION:
            self._record(ViolationKind.UNSUPPORTED_VERSION, context, request.body,
                         "it was refused with UNSUPPORTED_VERSION", self._advertised(context.api_key))

    def unrouted(self, context: RequestContext) -> None:
        if context.api_key == ApiKey.API_VERSIONS:
            return  # ApiVersions above the broker's range is how a client negotiates (KIP-511)
        served = self.served_versions().get(context.api_key)
        what = "the broker does not serve that API" if served is None else \
            f"the broker serves v{served[0]}-v{served[1]}"
        self._record(ViolationKind.UNSUPPORTED_VERSION, context, None,
                     f"answered as unsupported: {what}", self._advertised(context.api_key))

    # --- groups ---------------------------------------------------------------------------

    def _judge_stale(self, context: RequestContext, request: Request, codes: set[int]) -> None:
        stale = codes & STALE_CODES
        field = _GENERATION_FIELD.get(ApiKey(context.api_key))
        if not stale or field is None:
            return
        body = request.body
        group, member, generation = body["group_id"], body.get("member_id") or "", body.get(field, -1)
        why = self.groups.stale(group, member, generation, self._stamp(context), next(self._stamps))
        if why is None:
            return
        answered = ", ".join(ErrorCode(code).name for code in sorted(stale))
        latest = self.groups.latest(group, member)
        expected = "rejoin (JoinGroup, or a heartbeat with epoch 0) and use the generation it answers"
        if latest is not None:
            expected += f" (the last it was given: {latest})"
        self._record(ViolationKind.STALE_GENERATION, context, body,
                     f"member {member!r} of group {group!r} sent generation {generation}, answered "
                     f"{answered}: {why}", expected)

    def _synced(self, request: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        protocol_type = answer.get("protocol_type") or request.get("protocol_type")
        partitions = None
        if protocol_type in (None, CONSUMER_PROTOCOL_TYPE):  # before v5 the type is not said
            partitions = assigned_partitions(bytes(answer["assignment"] or b""))
        self.groups.synced(request["group_id"], request["member_id"], request["generation_id"], partitions)

    def _heartbeat(self, request: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        assignment = answer.get("assignment")
        partitions = None
        if assignment is not None:
            partitions = frozenset((self._name(topic["topic_id"]), partition)
                                   for topic in assignment["topic_partitions"] or ()
                                   for partition in topic["partitions"] or ())
        self.groups.heartbeat(request["group_id"], answer["member_id"], answer["member_epoch"], partitions)

    def _judge_commit(self, context: RequestContext, request: Request, answer: Mapping[str, Any]) -> None:
        body = request.body
        field = _GENERATION_FIELD[ApiKey(context.api_key)]
        generation, member = body.get(field, -1), body.get("member_id") or ""
        if generation < 0 or not member:
            return  # a commit outside group management: no assignment to hold it to
        accepted = [(self._topic(topic), partition["partition_index"])
                    for topic in answer["topics"] or () for partition in topic["partitions"] or ()
                    if partition["error_code"] == ErrorCode.NONE]
        unowned, owned = self.groups.unowned(body["group_id"], member, generation, accepted)
        if unowned:
            shown = ", ".join(f"{t}-{p}" for t, p in unowned)
            mine = ", ".join(f"{t}-{p}" for t, p in sorted(owned)) or "no partitions"
            self._record(ViolationKind.UNASSIGNED_COMMIT, context, body,
                         f"member {member!r} of group {body['group_id']!r} committed offsets for {shown}, "
                         f"not assigned to it at generation {generation} nor the one before; the "
                         f"coordinator accepted them",
                         f"commits only for the partitions it holds or is revoking at generation "
                         f"{generation}: {mine}")

    # --- produce --------------------------------------------------------------------------

    def _produced(self, context: RequestContext, request: Request, answer: Answer) -> None:
        stamp = self._stamp(context)
        batches = dict(self._batches(context, request.body))
        if answer is None or not isinstance(answer, Mapping):  # acks=0, or an answer an inner one made
            for partition, batch in batches.items():
                if answer is None:
                    self.sequences.dropped(stamp, partition, batch)
                else:
                    self.sequences.answered(stamp, partition, batch, _partition_code(answer, partition,
                                                                                    self._topic), False)
            return
        for topic in answer["responses"]:
            name = self._topic(topic)
            for partition in topic["partition_responses"]:
                where = (name, partition["index"])
                code = partition["error_code"]
                if code == ErrorCode.UNSUPPORTED_VERSION:
                    self._record(ViolationKind.UNSUPPORTED_VERSION, context, request.body,
                                 f"{name}-{partition['index']} was answered UNSUPPORTED_VERSION",
                                 self._advertised(context.api_key))
                sent = batches.get(where)
                judged = None if sent is None else self.sequences.answered(stamp, where, sent, code, True)
                if judged is not None:
                    what, expected, out_of_order = judged
                    kind = ViolationKind.OUT_OF_ORDER_SEQUENCE if out_of_order else \
                        ViolationKind.DUPLICATE_SEQUENCE
                    self._record(kind, context, request.body, f"{name}-{where[1]}: {what}", expected)

    def _batches(self, context: RequestContext, body: Mapping[str, Any]) -> Iterator[tuple[TopicPartition,
                                                                                         BatchSequences]]:
        """The idempotent batches of a Produce, by partition (one batch each, as Kafka requires)."""
        for topic in body["topic_data"]:
            name = self._topic(topic)
            for partition in topic["partition_data"]:
                records = partition["records"]
                raw = records.raw if records is not None else b""
                if len(raw) <= MAGIC_AT or raw[MAGIC_AT] != _MAGIC_V2:
                    continue
                try:
                    batch = RecordBatch(raw)
                except DecodeError:
                    continue
                if batch.producer_id >= 0 and batch.base_sequence >= 0:
                    yield (name, partition["index"]), BatchSequences(
                        batch.producer_id, batch.producer_epoch, batch.base_sequence,
                        batch.base_sequence + batch.record_count - 1)

    # --- helpers --------------------------------------------------------------------------

    def _record(self, kind: ViolationKind, context: RequestContext, body: Mapping[str, Any] | None,
                what: str, expected: str) -> None:
        violation = Violation(
            kind, context.api_key, context.api_version, context.correlation_id, context.connection.id,
            context.client_id, None if body is None else request_summary(body), what, expected)
        self.violations.record(violation)
        self.recorded(violation)

    def _advertised(self, api_key: int) -> str:
        served = self.served_versions().get(api_key)
        if served is None:
            return "only APIs the broker advertises in ApiVersions"
        return f"a version the broker advertises in ApiVersions: v{served[0]}-v{served[1]}"

    @staticmethod
    def _stamp(context: RequestContext) -> int:
        stamp: int = context.connection.attributes.get(_STAMP, 0)
        return stamp

    def _topic(self, topic: Mapping[str, Any]) -> str:
        name = topic.get("name")
        return name if name else self._name(topic.get("topic_id"))

    def _name(self, topic_id: uuid.UUID | None) -> str:
        if topic_id is None:
            return "?"
        return self.topic_name(topic_id) or str(topic_id)


_WATCHED = frozenset({ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.CONSUMER_GROUP_HEARTBEAT,
                      *_COMMITS})


def _codes(body: Mapping[str, Any]) -> set[int]:
    """Every error code in an answer: the top-level one and the per-topic and per-partition ones."""
    found: set[int] = set()
    stack: list[Any] = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key == "error_code" and isinstance(item, int):
                    found.add(item)
                elif isinstance(item, (Mapping, list, tuple)):
                    stack.append(item)
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return found


def _partition_code(answer: Any, partition: TopicPartition, topic: Callable[[Mapping[str, Any]], str]) -> int:
    """One partition's error code in a Produce answer an inner interceptor re-encoded."""
    body = answer.body if isinstance(answer, (EncodedResponse, ChunkedResponse)) else {}
    for entry in body.get("responses") or ():
        if topic(entry) == partition[0]:
            for answered in entry["partition_responses"]:
                if answered["index"] == partition[1]:
                    return int(answered["error_code"])
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)
