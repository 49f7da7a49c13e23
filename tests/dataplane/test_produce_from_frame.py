"""Produce's fast path from the frame (kafkapy.dataplane.produce_frame) held equal to the plain path.

Two brokers on one virtual clock (so both stamp the same times), one with every fast path and one
with ``FastPaths(from_frame=False)``, get the same Produce frames through their dispatchers'
``dispatch_all`` (what a connection's read calls): generated requests of every version, good and
bad (batches with every fault the append checks know, duplicates and out-of-order sequences,
several partitions, unknown topics and partitions, bad acks, tagged fields, any byte of the frame
changed). After each example the answers (or the connection closing), every partition's log bytes,
offsets and producer state must be equal; the fast path must have answered some of them, and a
valid request of every version must be answered by it.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from frame_paths import CountedPaths, answer_one_read
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.client import SimpleClient
from kafkapy.dataplane.produce_frame import FAST_VERSIONS
from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import LOG_APPEND_TIME, build_record_batch
from kafkapy.server.clock import VirtualClock
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.fastpaths import FastPaths
from kafkapy.store.base import NO_ACL_VERSION, AclResource, StoredAcl
from kafkapy.testing import wait_until

WALL_START = 1_750_000_000.0
NOW_MS = int(WALL_START * 1000)
TOPICS = {
    "plain": {"partitions": 2},
    "compacted": {"partitions": 1, "config": {"cleanup.policy": "compact"}},
    "appendtime": {"partitions": 1, "config": {"message.timestamp.type": "LogAppendTime"}},
    "bounded": {"partitions": 1, "config": {"message.timestamp.before.max.ms": "60000",
                                            "message.timestamp.after.max.ms": "60000"}},
    "small": {"partitions": 1, "config": {"max.message.bytes": "150"}},
}
MISSING_TOPIC_ID = uuid.UUID(int=12345)
CONNECTION = ConnectionInfo(id="from-frame-test", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                            client_address=("127.0.0.1", 40000), broker_address=("127.0.0.1", 9092))
_correlation = itertools.count(1)




@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[Broker, Broker]]:
    clock = VirtualClock(wall_start=WALL_START)
    # The generated transactional batches name no transaction a coordinator knows: KIP-890's
    # verification is off here (test_a_transaction_s_first_batch_is_verified_on_the_plain_path has it on).
    config = {"auto.create.topics.enable": False, "cluster.id": "from-frame",
              "transaction.partition.verification.enable": False}
    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(Broker(config, clock=clock))
        plain = stack.enter_context(Broker(config, clock=clock, fast_paths=FastPaths(from_frame=False)))
        for broker in (fast, plain):
            broker.seed(TOPICS)
        assert fast.runtime is not None
        fast.runtime.dispatcher.frame_paths = CountedPaths()
        yield fast, plain


def _topic_ids(broker: Broker) -> dict[str, uuid.UUID]:
    assert broker.runtime is not None
    return {name: info.topic_id for name, info in broker.runtime.cluster.topics.items()}


def _answer(broker: Broker, frame: bytes | bytearray) -> bytes | str:
    return answer_one_read(broker, CONNECTION, frame)


def _state(broker: Broker) -> dict[str, Any]:
    """Every partition log's bytes and offsets, and its producer table."""
    def run() -> dict[str, Any]:
        home = broker._dataplane().partitions.home
        logs = {key: (b"".join(bytes(c) for c in log.read(log.log_start_offset, 1 << 24).chunks),
                      log.log_start_offset, log.log_end_offset, log.high_watermark, log.last_stable_offset)
                for key, log in home.logs.logs.items()}
        producers = {key: (dict(state.producers), state.map_end_offset, state.first_unstable_offset)
                     for key, state in home.producers.items()}
        return {"logs": logs, "producers": producers}
    return broker._on_loop(run)


def _frame(version: int, acks: int, transactional_id: str | None, parts: list[tuple[str, int, bytes | None]],
           topic_ids: dict[str, uuid.UUID], correlation_id: int) -> bytes:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index, records in parts:
        topics.setdefault(topic, []).append({"index": index, "records": records})
    topic_data = [{"topic_id": topic_ids.get(topic, MISSING_TOPIC_ID)} if version >= 13 else {"name": topic}
                  for topic in topics]
    for entry, partitions in zip(topic_data, topics.values()):
        entry["partition_data"] = partitions
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 30_000,
            "topic_data": topic_data}
    return encode_request(ApiKey.PRODUCE, version, correlation_id, "from-frame", body)


@st.composite
def batches(draw: st.DrawFn, sequences: dict[tuple[int, str, int], int], topic: str,
            index: int) -> bytes | None:
    """One partition's records: mostly a batch a producer would send, else one with a fault."""
    if draw(st.integers(0, 30)) == 0:
        return None
    count = draw(st.integers(1, 4))
    key = draw(st.sampled_from([b"k", None]))
    timestamp = draw(st.sampled_from([NOW_MS, NOW_MS - 10, NOW_MS - 10**7, NOW_MS + 10**7]))
    records = [{"key": key, "value": b"v" * draw(st.integers(0, 40)), "timestamp": timestamp + i}
               for i in range(count)]
    producer = draw(st.sampled_from([None, 7001, 7002]))
    transactional = producer is not None and draw(st.booleans())
    options: dict[str, Any] = {"compression": draw(st.sampled_from(["none", "none", "gzip", "zstd"]))}
    if producer is not None:
        seq_key = (producer, topic, index)
        expected = sequences.get(seq_key, 0)
        sequence = draw(st.sampled_from([expected, expected, expected, max(expected - count, 0),
                                         expected + 3]))
        options.update(producer_id=producer, producer_epoch=draw(st.sampled_from([0, 0, 0, 1])),
                       base_sequence=sequence, is_transactional=transactional)
        sequences[seq_key] = max(expected, sequence + count)  # a guess: the brokers decide
    fault = draw(st.sampled_from(["none"] * 14 + ["base_offset", "append_time", "flip", "cut", "trailing",
                                                  "control", "count"]))
    if fault == "base_offset":
        options["base_offset"] = 3
    elif fault == "append_time":
        options["timestamp_type"] = LOG_APPEND_TIME
    elif fault == "control":
        options["is_control"] = True
    data = bytearray(build_record_batch(records, **options))
    if fault == "flip":
        data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    elif fault == "cut":
        del data[draw(st.integers(1, len(data) - 1)):]
    elif fault == "trailing":
        data += draw(st.binary(min_size=1, max_size=70))
    elif fault == "count":
        data[57:61] = (count + 1).to_bytes(4, "big")
    return bytes(data)


@st.composite
def requests(draw: st.DrawFn, sequences: dict[tuple[int, str, int], int]) -> dict[str, Any]:
    version = draw(st.sampled_from(FAST_VERSIONS))
    parts = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 2, 3]))):
        topic = draw(st.sampled_from([*TOPICS, "plain", "plain", "missing"]))
        index = draw(st.sampled_from([0, 0, 0, 1, 7]))
        parts.append((topic, index, draw(batches(sequences, topic, index))))
    return {"version": version, "acks": draw(st.sampled_from([1, 1, -1, 0, 2])),
            "transactional_id": draw(st.sampled_from([None, None, "tx-a"])), "parts": parts,
            "change": draw(st.sampled_from([None] * 8 + ["byte", "tag"])),
            "at": draw(st.integers(8, 10_000)), "xor": draw(st.integers(1, 255))}


def _changed(frame: bytes, request: dict[str, Any]) -> bytes:
    """The frame as generated, with one byte changed or an unknown tagged field in the body."""
    if request["change"] == "byte":
        data = bytearray(frame)
        data[request["at"] % len(data)] ^= request["xor"]
        return bytes(data)
    if request["change"] == "tag" and request["version"] >= 9:
        return frame[:-1] + b"\x01\x05\x01X"  # the body's tag section: one unknown tag
    return frame


def _one_batch(version: int, acks: int, transactional_id: str | None, topic: str, records: bytes, *,
               index: int = 0) -> Callable[[dict[str, uuid.UUID]], bytes]:
    """A builder of the frame of one batch to one partition, by the brokers' topic ids."""
    correlation_id = next(_correlation)
    return lambda ids: _frame(version, acks, transactional_id, [(topic, index, records)], ids, correlation_id)


def _exchange(fast: Broker, plain: Broker, build: Callable[[dict[str, uuid.UUID]], bytes],
              change: Callable[[bytes], bytes] = lambda frame: frame, *,
              kept: bool = False) -> list[bytes | str]:
    """The answers of both brokers to the frame ``build`` makes with each one's topic ids, after
    ``change``. v13 names topics by id, so in the answers each id is replaced by its topic's name
    (an id ``change`` altered, by the name marked as altered where it was). ``kept``: the fast
    broker gets the frame as a bytearray, as FrameBuffer hands out a large frame that spanned reads
    (FastPaths.kept_frames), which it may keep only if it answers it."""
    answers = []
    for broker in (fast, plain):
        ids = _topic_ids(broker)
        frame = build(ids)
        changed = change(frame)
        if kept and broker is fast:
            received = bytearray(changed)
            answered = CountedPaths.answered
            answer = _answer(broker, received)
            if CountedPaths.answered == answered:  # declined: the plain path read it as it came
                assert received == changed
        else:
            answer = _answer(broker, changed)
        if isinstance(answer, bytes):
            for name, topic_id in ids.items():
                at = frame.find(topic_id.bytes)
                sent = changed[at:at + 16] if at >= 0 else topic_id.bytes
                for given, token in ((sent, b"~" + name.encode()), (topic_id.bytes, name.encode())):
                    answer = answer.replace(given, token.ljust(16, b"_"))
        answers.append(answer)
    return answers


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_fast_path_answers_and_stores_as_the_plain_path(brokers: tuple[Broker, Broker],
                                                             data: st.DataObject) -> None:
    fast, plain = brokers
    sequences: dict[tuple[int, str, int], int] = {}
    for request in data.draw(st.lists(requests(sequences), min_size=1, max_size=5)):
        correlation_id = next(_correlation)
        kept = data.draw(st.booleans(), label="kept as a bytearray")

        def build(ids: dict[str, uuid.UUID], request: dict[str, Any] = request,
                  correlation_id: int = correlation_id) -> bytes:
            return _frame(request["version"], request["acks"], request["transactional_id"],
                          request["parts"], ids, correlation_id)
        answered = CountedPaths.answered
        fast_answer, plain_answer = _exchange(fast, plain, build,
                                              lambda frame, request=request: _changed(frame, request),
                                              kept=kept)
        assert fast_answer == plain_answer, request
        parts = "one partition" if len(request["parts"]) == 1 else "several partitions"
        event(f"{parts}: answered by the fast path" if CountedPaths.answered > answered
              else f"{parts}: left to the plain path")
    assert _state(fast) == _state(plain)


@pytest.mark.parametrize("version", FAST_VERSIONS)
def test_a_producer_s_common_request_takes_the_fast_path(brokers: tuple[Broker, Broker],
                                                          version: int) -> None:
    """A valid one-batch request of each version (plain, idempotent, transactional; acks 1 and 0),
    after the partition's first append (which makes its log and producer table on the plain path),
    is answered by the fast path, and as the plain path answers it."""
    fast, plain = brokers
    producer = 8000 + version

    def send(records: bytes, acks: int, transactional_id: str | None = None, kept: bool = False) -> None:
        fast_answer, plain_answer = _exchange(fast, plain, _one_batch(version, acks, transactional_id,
                                                                      "plain", records, index=1), kept=kept)
        assert fast_answer == plain_answer
        assert fast_answer == (b"" if acks == 0 else fast_answer) and fast_answer != "closed"

    send(build_record_batch([{"value": b"first"}]), 1)  # the log exists from here on
    before = CountedPaths.answered
    send(build_record_batch([{"value": b"plain"}]), 1)
    send(build_record_batch([{"value": b"acks 0"}]), 0)
    send(build_record_batch([{"value": b"idempotent"}], producer_id=producer, producer_epoch=0,
                            base_sequence=0), -1)
    send(build_record_batch([{"value": b"transactional"}], producer_id=producer + 100, producer_epoch=0,
                            base_sequence=0, is_transactional=True), -1, "tx-b")
    send(build_record_batch([{"value": b"kept"}]), 1, kept=True)  # a large frame's own bytearray
    send(build_record_batch([{"value": b"kept, idempotent"}], producer_id=producer, producer_epoch=0,
                            base_sequence=1), -1, kept=True)
    assert CountedPaths.answered == before + 6
    # librdkafka's shape: one request with a batch for every partition it has one for, here two
    # topics, three partitions, idempotent (a sequence per partition); the first makes the logs
    multi = 9000 + version

    def send_many(round_: int) -> None:
        correlation_id = next(_correlation)
        parts = [(topic, index, build_record_batch([{"key": b"k", "value": b"r%d" % round_}],
                                                   producer_id=multi, producer_epoch=0, base_sequence=round_))
                 for topic, index in (("plain", 0), ("plain", 1), ("compacted", 0))]
        fast_answer, plain_answer = _exchange(
            fast, plain, lambda ids: _frame(version, -1, None, parts, ids, correlation_id))
        assert fast_answer == plain_answer and fast_answer != "closed"

    send_many(0)
    before = CountedPaths.answered
    send_many(1)
    send_many(1)  # a retry of every batch: duplicates, left to the plain path, which answers their offsets
    assert CountedPaths.answered == before + 1
    assert _state(fast) == _state(plain)


@pytest.mark.parametrize("version", [3, 9, 13])
def test_transactional_batches_of_two_producers_are_left_to_the_plain_path(brokers: tuple[Broker, Broker],
                                                                           version: int) -> None:
    """Transactions already open in both partitions (so nothing is left to verify), then one
    request whose transactional batches name two producers: the fast path declines it and both
    answer every partition INVALID_PRODUCER_ID_MAPPING, storing nothing (Kafka's
    ReplicaManager.handleProduceAppend). The fast path took it before, and appended both."""
    fast, plain = brokers
    first, second = 8500 + version, 8600 + version

    def send(parts: list[tuple[str, int, bytes | None]]) -> bytes | str:
        correlation_id = next(_correlation)
        fast_answer, plain_answer = _exchange(
            fast, plain, lambda ids: _frame(version, -1, "tx-two", parts, ids, correlation_id))
        assert fast_answer == plain_answer and fast_answer != "closed"
        return fast_answer

    def batch(producer: int, sequence: int) -> bytes:
        return build_record_batch([{"value": b"in a transaction"}], producer_id=producer, producer_epoch=0,
                                  base_sequence=sequence, is_transactional=True)

    send([("plain", 0, batch(first, 0))])  # each producer's transaction opens in its partition
    send([("plain", 1, batch(second, 0))])
    before = CountedPaths.answered
    answer = send([("plain", 0, batch(first, 1)), ("plain", 1, batch(second, 1))])
    assert CountedPaths.answered == before
    assert isinstance(answer, bytes)
    body = decode_response(answer[4:], ApiKey.PRODUCE, version).body
    codes = [p["error_code"] for t in body["responses"] for p in t["partition_responses"]]
    assert codes == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2
    assert _state(fast) == _state(plain)


def _begin(broker: Broker, transactional_id: str, topic: str) -> tuple[int, int]:
    """A transaction begun with its coordinator (InitProducerId, AddPartitionsToTxn of partition 0)."""
    with SimpleClient(broker.bootstrap_servers) as client:
        found = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1})
        assert found["error_code"] == ErrorCode.NONE  # the coordinator's topic made, as a producer has it
        answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout_ms": 60_000,
            "producer_id": -1, "producer_epoch": -1})
        assert answer["error_code"] == ErrorCode.NONE
        added = client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": answer["producer_id"],
            "v3_and_below_producer_epoch": answer["producer_epoch"],
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        [[result]] = [t["results_by_partition"] for t in added["results_by_topic_v3_and_below"]]
        assert result["partition_error_code"] == ErrorCode.NONE
        return answer["producer_id"], answer["producer_epoch"]


def _next_transaction(broker: Broker, transactional_id: str, producer: int, epoch: int, topic: str) -> None:
    """The open transaction committed (EndTxn) and the next one begun with partition 0 of ``topic``
    once the commit's markers are written."""
    with SimpleClient(broker.bootstrap_servers) as client:
        ended = client.request(ApiKey.END_TXN, 3, {"transactional_id": transactional_id,
                                                  "producer_id": producer, "producer_epoch": epoch,
                                                  "committed": True})
        assert ended["error_code"] == ErrorCode.NONE

        def added() -> bool:
            answer = client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
            [[result]] = [t["results_by_partition"] for t in answer["results_by_topic_v3_and_below"]]
            code = result["partition_error_code"]
            assert code in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS)
            return bool(code == ErrorCode.NONE)
        wait_until(added, timeout=10.0)


def test_a_transaction_s_first_batch_is_verified_with_the_coordinator() -> None:
    """With KIP-890's verification on (the default), a transactional batch whose producer has no
    open transaction in the partition is checked with the transaction coordinator first: in place
    on the fast path when the coordinator is this broker and finds the partition in the transaction
    (a transaction's first batch, every transaction), else on the plain path. A batch of a
    transaction that does not hold the partition is refused alike by both brokers."""
    clock = VirtualClock(wall_start=WALL_START)
    config = {"auto.create.topics.enable": False, "cluster.id": "from-frame-verified",
              "transaction.state.log.num.partitions": 1}
    with Broker(config, clock=clock) as fast, \
            Broker(config, clock=clock, fast_paths=FastPaths(from_frame=False)) as plain:
        begun = set()
        for broker in (fast, plain):
            broker.seed({"t": {"partitions": 1}, "other": {"partitions": 1}})
            begun.add(_begin(broker, "tx", "t"))
        [(producer, epoch)] = begun  # the same producer id on both: one frame serves both
        assert fast.runtime is not None
        fast.runtime.dispatcher.frame_paths = CountedPaths()
        sequence = 0  # the producer's next one in "t"
        for version in (3, 9, 13):
            # not in the transaction: Produce v11+ clients know TRANSACTION_ABORTABLE (KIP-890)
            refused = ErrorCode.INVALID_TXN_STATE if version <= 10 else ErrorCode.TRANSACTION_ABORTABLE
            for first, topic, expected in ((True, "t", ErrorCode.NONE), (False, "t", ErrorCode.NONE),
                                           (False, "other", refused)):
                # from the frame: a batch of the transaction already open in "t" (not its first),
                # once the version has been served (its first request goes the plain way)
                taken = int(topic == "t" and sequence > 0 and not first)
                records = build_record_batch([{"value": b"in a transaction"}], producer_id=producer,
                                             producer_epoch=epoch, is_transactional=True,
                                             base_sequence=sequence if topic == "t" else 0)
                before = CountedPaths.answered
                fast_answer, plain_answer = _exchange(fast, plain,
                                                      _one_batch(version, 1, "tx", topic, records))
                assert fast_answer == plain_answer
                assert isinstance(plain_answer, bytes)
                response = decode_response(plain_answer[4:], ApiKey.PRODUCE, version).body
                assert response["responses"][0]["partition_responses"][0]["error_code"] == expected
                assert CountedPaths.answered == before + taken
                sequence += topic == "t"
        # A second transaction: its first batch in "t" is verified in place and taken from the frame.
        for broker in (fast, plain):
            _next_transaction(broker, "tx", producer, epoch, "t")
        records = build_record_batch([{"value": b"a second transaction"}], producer_id=producer,
                                     producer_epoch=epoch, is_transactional=True, base_sequence=sequence)
        before = CountedPaths.answered
        fast_answer, plain_answer = _exchange(fast, plain, _one_batch(13, 1, "tx", "t", records))
        assert fast_answer == plain_answer
        assert isinstance(plain_answer, bytes)
        response = decode_response(plain_answer[4:], ApiKey.PRODUCE, 13).body
        assert response["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
        assert CountedPaths.answered == before + 1
        assert _state(fast) == _state(plain)


def _deny_write(broker: Broker, resource_type: str, acl_type: str, name: str) -> None:
    """Store a DENY of WRITE to everyone on one resource, as CreateAcls would, and wait until the
    broker's ACL authorizer has heard of it."""
    runtime = broker.runtime
    assert runtime is not None
    runtime.store.set_resource_acls(AclResource("LITERAL", acl_type, name),
                                    frozenset({StoredAcl("User:*", "Deny", "Write", "*")}), NO_ACL_VERSION)
    wait_until(lambda: not runtime.authorizer.authorize("User:ANONYMOUS", "127.0.0.1", "WRITE", resource_type,
                                                        name), timeout=10)


def test_a_batch_the_principal_may_not_write_is_refused_alike() -> None:
    """With WRITE on the transactional id or on the topic denied (ACLs), the fast path declines
    (after asking the authorizer) and the plain path answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    or TOPIC_AUTHORIZATION_FAILED, storing nothing."""
    clock = VirtualClock(wall_start=WALL_START)
    config = {"auto.create.topics.enable": False, "cluster.id": "from-frame-denied",
              "authorizer.class.name": "acl", "allow.everyone.if.no.acl.found": True}
    with Broker(config, clock=clock) as fast, \
            Broker(config, clock=clock, fast_paths=FastPaths(from_frame=False)) as plain:
        for broker in (fast, plain):
            broker.seed({"t": {"partitions": 1}, "denied": {"partitions": 1}})
            _deny_write(broker, "TRANSACTIONAL_ID", "TransactionalId", "tx")
            _deny_write(broker, "TOPIC", "Topic", "denied")
        assert fast.runtime is not None
        fast.runtime.dispatcher.frame_paths = CountedPaths()
        for version in (3, 8, 9, 13):
            for topic, records, transactional_id, expected in (  # (a version's first request: plain)
                    ("t", build_record_batch([{"value": b"plain"}]), None, ErrorCode.NONE),
                    ("t", build_record_batch([{"value": b"plain"}]), None, ErrorCode.NONE),
                    ("t", build_record_batch([{"value": b"in a transaction"}], producer_id=9000 + version,
                                             producer_epoch=0, base_sequence=0, is_transactional=True), "tx",
                     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                    ("denied", build_record_batch([{"value": b"no"}]), None,
                     ErrorCode.TOPIC_AUTHORIZATION_FAILED)):
                fast_answer, plain_answer = _exchange(fast, plain, _one_batch(version, 1, transactional_id,
                                                                              topic, records))
                assert fast_answer == plain_answer
                assert isinstance(plain_answer, bytes)
                response = decode_response(plain_answer[4:], ApiKey.PRODUCE, version).body
                code = response["responses"][0]["partition_responses"][0]["error_code"]
                assert code == expected
        assert CountedPaths.answered > 0  # the second plain batch of each version
        assert _state(fast) == _state(plain)
