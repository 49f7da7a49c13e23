"""Every API the broker serves, fed bodies that decode but make no sense, never breaks it.

tests/server/test_fuzz_server.py sends garbage bytes, which the framing and the codec turn away
before any handler runs. Here each request is well formed at its version (built from the API's
spec, field by field) but its values are random: unknown and internal topics, negative
partitions and offsets, impossible timestamps, ids of nothing, duplicates, nulls where a field is
nullable. That reaches the handlers. For every one the broker must answer with Kafka's errors, or
close that one connection where Kafka would: no handler may fail (a logged traceback), answer
UNKNOWN_SERVER_ERROR (kafkapy always knows what went wrong), or send what does not decode, and a
well-behaved connection is served afterwards. Strings may hold bytes that are not UTF-8.

Values lean towards the names and numbers the broker knows (the seeded topic, its partitions,
small ids), so that the deeper paths are taken too. Waits are kept short: fields that ask the
broker to wait (timeouts, long polls) draw small values. ``KAFKAPY_FUZZ_EXAMPLES`` (default 500)
sets the number of requests per broker set-up; raise it for a soak.
"""

from __future__ import annotations

import os
import socket
import struct
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from error_log import ErrorCollector
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from server_wire import KafkaSocket, frame, split_address

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import catalogue, decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.protocol.specs import FieldSpec

EXAMPLES = int(os.environ.get("KAFKAPY_FUZZ_EXAMPLES", "500"))
TOPIC = "t"
NAMES = [TOPIC, "missing", "__consumer_offsets", "__transaction_state", "", "g", "etl", "a" * 300]
# Strings some handler parses further (regexes, configs, principals, hosts): the soak found regexes
# that re.compile fails on with OverflowError / RecursionError instead of re.error.
TRICKY = ["a{4294967296}", "(" * 1200 + ")" * 1200, "t.*", "User:alice", "client_id=a{4294967296}",
          "metrics=*", "\x00", "9" * 5000, "=", "[", "*"]
# Bytes that are not UTF-8 (written as surrogate escapes): Kafka reads them as U+FFFD and serves on.
NOT_UTF8 = st.binary(min_size=1, max_size=6).map(lambda data: data.decode("utf-8", "surrogateescape"))
ANSWER_WAIT_S = 2.0  # long enough for every short wait below; a request still unanswered then is left
NO_ANSWER_WAIT_S = 0.2  # acks=0: nothing may come back
WAITS = ("timeout_ms", "max_wait_ms")  # fields that make a handler wait, by name suffix
SMALL_INTS = [0, 1, 2, 3, -1, -2, 100]
INT_BITS = {"int8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64}
SOFTWARE = {"client_software_name": "fuzz", "client_software_version": "1"}


def _records() -> list[bytes]:
    plain = build_record_batch([{"key": b"k", "value": b"v"}], base_timestamp=1)
    return [bytes(plain), bytes(plain)[:20], b""]


RECORDS = _records()


def _integers(kind: str, name: str) -> st.SearchStrategy[int]:
    bits = INT_BITS[kind]
    low, high = (0, (1 << bits) - 1) if kind.startswith("u") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if name.endswith(WAITS):
        return st.integers(max(low, -1), 50)
    if name == "acks":
        return st.sampled_from([-1, 0, 1, 2])
    return st.sampled_from([v for v in SMALL_INTS if low <= v <= high]) | st.integers(low, high)


def _scalar(kind: str, name: str) -> st.SearchStrategy[Any]:
    if kind in INT_BITS:
        return _integers(kind, name)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return st.sampled_from(NAMES) | st.text(max_size=6) | st.sampled_from(TRICKY) | NOT_UTF8
    if kind == "bytes":
        return st.binary(max_size=24)
    if kind == "records":
        return st.sampled_from(RECORDS) | st.binary(max_size=40)
    if kind == "uuid":
        return st.just(uuid.UUID(int=0)) | st.uuids()
    raise AssertionError(f"no strategy for {kind}")


def _field(field: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    element = (_struct(field.fields, version) if field.fields is not None
               else _scalar(field.element_type, field.snake))
    strategy = st.lists(element, max_size=3) if field.is_array else element
    return st.none() | strategy if field.nullable_in(version) else strategy


def _struct(fields: tuple[FieldSpec, ...], version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({f.snake: _field(f, version) for f in fields if version in f.versions})


@pytest.fixture(scope="module", params=["memory", "log.dirs", "3 brokers", "acls"])
def broker(request: pytest.FixtureRequest, errors: ErrorCollector,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """Logs in memory, Kafka's segment files, a cluster (where requests meet other brokers'
    partitions and the controller is elsewhere), and Kafka's ACL authorizer (every request asks
    it; the ACL APIs create, describe and delete random bindings)."""
    config: dict[str, str] = {}
    if request.param == "log.dirs":
        config = {"log.dirs": str(tmp_path_factory.mktemp("logs"))}
    elif request.param == "acls":
        config = {"authorizer.class.name": "acl", "allow.everyone.if.no.acl.found": "true"}
    with Broker(config, brokers=3 if request.param == "3 brokers" else 1) as running:
        running.seed({TOPIC: {"partitions": 3, "records": [{"key": "k", "value": "v"}] * 3}})
        yield running


@pytest.fixture(scope="module")
def served(broker: Broker) -> dict[int, tuple[int, int]]:
    """Every API the broker advertises, with its version range."""
    with KafkaSocket(_addresses(broker)[0]) as s:
        answer = s.call(ApiKey.API_VERSIONS, 3, SOFTWARE).body
    ranges = {a["api_key"]: (a["min_version"], a["max_version"]) for a in answer["api_keys"]}
    with warnings.catch_warnings():  # kafka-python reads its specs with deprecated importlib calls
        warnings.simplefilter("ignore", DeprecationWarning)
        for key in ranges:
            api = catalogue()[key]
            assert api.request.fields is not None and api.response.fields is not None
    return ranges


def _addresses(broker: Broker) -> list[str]:
    return broker.bootstrap_servers.split(",")  # a cluster's: one a broker


def _error_codes(value: Any) -> Iterator[int]:
    if isinstance(value, dict):
        for name, inner in value.items():
            if name == "error_code":
                yield inner
            else:
                yield from _error_codes(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _error_codes(inner)


def _exchange(address: str, request: bytes, wait_s: float) -> bytes | None:
    """The response frame's body, None for no answer in ``wait_s``, b"" for a closed connection."""
    sock = socket.create_connection(split_address(address), timeout=wait_s)
    try:
        sock.sendall(frame(request))
        received = b""
        while len(received) < 4 or len(received) < 4 + struct.unpack_from(">i", received)[0]:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return None
            if not chunk:
                return b""
            received += chunk
        return received[4:]
    finally:
        sock.close()


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_api_answers_nonsense_with_kafkas_errors(broker: Broker, errors: ErrorCollector,
                                                       served: dict[int, tuple[int, int]],
                                                       data: st.DataObject) -> None:
    api_key = data.draw(st.sampled_from(sorted(served)), label="api")
    version = data.draw(st.integers(*served[api_key]), label="version")
    event(f"{ApiKey(api_key).name}")
    body = data.draw(_struct(catalogue()[api_key].request.fields, version), label="body")
    if api_key == ApiKey.API_VERSIONS and version >= 3:
        body = {**body, **SOFTWARE}  # else refused by name, which tests/server covers
    correlation_id = data.draw(st.integers(0, 2**31 - 1), label="correlation id")
    request = encode_request(api_key, version, correlation_id, "fuzz", body)
    silent = api_key == ApiKey.PRODUCE and body.get("acks") == 0
    address = data.draw(st.sampled_from(_addresses(broker)), label="broker")
    answer = _exchange(address, request, NO_ANSWER_WAIT_S if silent else ANSWER_WAIT_S)
    assert errors.messages == [], f"{ApiKey(api_key).name} v{version}: {errors.messages}"
    if answer:
        assert not silent, "acks=0 is never answered"
        decoded = decode_response(answer, api_key, version)
        assert decoded.correlation_id == correlation_id
        assert ErrorCode.UNKNOWN_SERVER_ERROR not in set(_error_codes(decoded.body)), decoded.body
    with KafkaSocket(address) as good:
        assert good.call(ApiKey.API_VERSIONS, 3, SOFTWARE).body["error_code"] == ErrorCode.NONE


def _frames_until(sock: socket.socket, count: int, wait_s: float) -> list[bytes]:
    """Up to ``count`` response frames' bodies, fewer if the connection closes or goes quiet."""
    sock.settimeout(wait_s)
    received, frames = b"", []
    while len(frames) < count:
        while len(received) >= 4 and len(received) >= 4 + struct.unpack_from(">i", received)[0]:
            size = struct.unpack_from(">i", received)[0]
            frames.append(received[4:4 + size])
            received = received[4 + size:]
        if len(frames) >= count:
            break
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        received += chunk
    return frames


@settings(max_examples=EXAMPLES // 5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_pipelined_nonsense_is_answered_in_order(broker: Broker, errors: ErrorCollector,
                                                 served: dict[int, tuple[int, int]],
                                                 data: st.DataObject) -> None:
    """Several such requests sent at once on one connection, waiting handlers among them: the
    answers come back in the order of the requests (Kafka's promise per connection), each the
    answer to its own request."""
    sent: list[tuple[int, int, int]] = []  # (api key, version, correlation id) of those answered
    frames = []
    for correlation_id in range(data.draw(st.integers(2, 5), label="requests")):
        api_key = data.draw(st.sampled_from(sorted(served)), label="api")
        version = data.draw(st.integers(*served[api_key]), label="version")
        body = data.draw(_struct(catalogue()[api_key].request.fields, version), label="body")
        if api_key == ApiKey.API_VERSIONS and version >= 3:
            body = {**body, **SOFTWARE}
        if api_key == ApiKey.PRODUCE and body.get("acks") == 0:
            continue  # unanswered, and a refused one closes the connection
        frames.append(frame(encode_request(api_key, version, correlation_id, "fuzz", body)))
        sent.append((api_key, version, correlation_id))
    address = data.draw(st.sampled_from(_addresses(broker)), label="broker")
    with socket.create_connection(split_address(address), timeout=ANSWER_WAIT_S) as sock:
        sock.sendall(b"".join(frames))
        answers = _frames_until(sock, len(sent), ANSWER_WAIT_S)
    assert errors.messages == [], errors.messages
    for (api_key, version, correlation_id), answer in zip(sent, answers):
        decoded = decode_response(answer, api_key, version)
        assert decoded.correlation_id == correlation_id, f"answers out of order: {sent}"
        assert ErrorCode.UNKNOWN_SERVER_ERROR not in set(_error_codes(decoded.body)), decoded.body


# --- what the tests above found, pinned --------------------------------------------------------


@pytest.fixture
def seeded() -> Iterator[Broker]:
    """A broker of its own: the fuzz above may have deleted the seeded topic of the shared one."""
    with Broker() as running:
        running.seed({TOPIC: {"partitions": 3, "records": [{"partition": 0, "value": "v"}] * 3}})
        yield running


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_refuses_a_null_name_or_a_topic_id(seeded: Broker, version: int) -> None:
    """Kafka's handleTopicMetadataRequest: INVALID_REQUEST for every topic asked (a null name
    answered as "", since the response's name is not nullable before v12). kafkapy used to fail
    encoding its answer and close the connection."""
    zero = uuid.UUID(int=0)
    with KafkaSocket(seeded.bootstrap_servers) as s:
        def metadata(topics: list[dict[str, Any]]) -> dict[str, Any]:
            return dict(s.call(ApiKey.METADATA, version,
                               {"topics": topics, "allow_auto_topic_creation": False}).body)

        for topics in ([{"name": None, "topic_id": zero}, {"name": TOPIC, "topic_id": zero}],
                       [{"name": TOPIC, "topic_id": uuid.uuid4()}]):
            body = metadata(topics)
            assert [(t["name"], t["error_code"]) for t in body["topics"]] == [
                (t["name"] or "", ErrorCode.INVALID_REQUEST) for t in topics]
            assert body["brokers"] == []
        assert metadata([{"name": TOPIC, "topic_id": zero}])["topics"][0]["error_code"] == ErrorCode.NONE


def test_list_offsets_answers_every_negative_timestamp(seeded: Broker) -> None:
    """-5 (KIP-1005's latest tiered offset) is -1 without remote storage, and any other negative
    timestamp that is no special one is UNSUPPORTED_VERSION, as Kafka's ReplicaManager answers it
    before any lookup. kafkapy used to fail the handler on both."""
    answers = []
    with KafkaSocket(seeded.bootstrap_servers) as s:
        for timestamp in (-5, -7, -(2**63)):
            asked = [{"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]
            body = s.call(ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0,
                                                   "topics": [{"name": TOPIC, "partitions": asked}]}).body
            [answer] = body["topics"][0]["partitions"]
            answers.append((answer["error_code"], answer["offset"]))
    unsupported = (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert answers == [(ErrorCode.NONE, -1), unsupported, unsupported]
