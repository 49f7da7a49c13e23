"""KIP-388 observers see every request and response, read-only, and can never hurt the broker."""

from __future__ import annotations

import logging
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the broker imports observer_fixtures by name

from held_request import HeldDescribeCluster, held
from observer_fixtures import RaisingObserver, RecordingObserver
from server_wire import KafkaSocket, raw_header

from kafkapy import Broker
from kafkapy.server.config import ConfigError

RECORDING = "observer_fixtures.RecordingObserver"
RAISING = "observer_fixtures.RaisingObserver"
SOFTWARE = {"client_software_name": "kafkapy-tests", "client_software_version": "1.0"}


@pytest.fixture(autouse=True)
def fresh_registries() -> Iterator[None]:
    RecordingObserver.instances.clear()
    RaisingObserver.instances.clear()
    yield
    RecordingObserver.instances.clear()
    RaisingObserver.instances.clear()


def _exchange(s: KafkaSocket) -> list[tuple[int | None, int, int, bytes]]:
    """A mix of requests; returns (api_key or None for empty, version, correlation id, raw response)."""
    sent = []
    s.send(18, 3, SOFTWARE, correlation_id=11)
    sent.append((18, 3, 11))
    s.send(3, 12, {"topics": [{"name": "missing"}], "allow_auto_topic_creation": False}, correlation_id=12)
    sent.append((3, 12, 12))
    s.send_body(raw_header(4242, 2, 13))  # unknown key: empty response
    sent.append((4242, 2, 13))
    s.send_body(raw_header(3, 99, 14))  # unsupported version: empty response
    sent.append((3, 99, 14))
    s.send_body(raw_header(18, 77, 15, b"\x00"))  # ApiVersions too new: v0 error body
    sent.append((18, 77, 15))
    s.send(60, 1, {}, correlation_id=16)
    sent.append((60, 1, 16))
    s.send(1010, 0, {"node_ids": [-1]}, correlation_id=17)
    sent.append((1010, 0, 17))
    return [(key, version, cid, s.read_frame()) for key, version, cid in sent]


def test_observer_sees_every_request_and_response() -> None:
    with Broker({"observer.class.names": RECORDING, "observer.custom.setting": "42"}) as b:
        (observer,) = RecordingObserver.instances
        assert observer.configs is not None
        assert observer.configs["observer.class.names"] == [RECORDING]
        assert observer.configs["broker.id"] == -1  # what was configured (the store assigned the real one)
        with KafkaSocket(b.bootstrap_servers) as s:
            exchanged = _exchange(s)
            client_host = s.sock.getsockname()[0]
        assert observer.closed_with == []
    assert len(observer.closed_with) == 1 and observer.closed_with[0] > 0

    requests = [(key, version, cid) for _, _, _, key, version, cid in observer.requests]
    assert requests == [(key, version, cid) for key, version, cid, _ in exchanged]
    for _, address, principal, _, _, _ in observer.requests:
        assert address == client_host
        assert principal == "User:ANONYMOUS"
    by_cid = {cid: request for request, *_, cid in observer.requests}
    assert by_cid[13] is None and by_cid[14] is None and by_cid[15] is None  # not decoded
    assert all(by_cid[cid] is not None for cid in (11, 12, 16, 17))
    assert by_cid[12]["topics"][0]["name"] == "missing"
    assert by_cid[11]["client_software_name"] == "kafkapy-tests"
    assert tuple(by_cid[17]["node_ids"]) == (-1,)

    responses = {cid: (response, version) for response, version, cid in observer.responses}
    assert sorted(responses) == [11, 12, 13, 14, 15, 16, 17]
    assert [cid for _, _, cid in observer.responses] == [11, 12, 13, 14, 15, 16, 17]
    assert responses[13] == (None, 2) and responses[14] == (None, 99)  # the empty responses
    assert responses[15][1] == 0 and responses[15][0]["error_code"] == 35
    assert responses[12][1] == 12 and responses[12][0]["topics"][0]["error_code"] == 3
    assert responses[11][0]["error_code"] == 0
    assert responses[17][0]["brokers"][0]["node_id"] == b.broker_id
    for key, _, cid, raw in exchanged:
        assert struct.unpack_from(">i", raw)[0] == cid
        if key == 4242 or (key == 3 and cid == 14):
            assert raw == struct.pack(">i", cid)
    assert observer.mutation_errors == []


def test_observer_configure_receives_custom_keys() -> None:
    with Broker({"observer.class.names": RECORDING, "observer.custom.setting": "42"}):
        (observer,) = RecordingObserver.instances
        assert observer.configs is not None
        assert observer.configs.get("observer.custom.setting") == "42"


def test_view_is_read_only() -> None:
    with Broker({"observer.class.names": RECORDING}) as b, KafkaSocket(b.bootstrap_servers) as s:
        s.call(3, 1, {"topics": [{"name": "a"}, {"name": "b"}]})
        (observer,) = RecordingObserver.instances
        request = observer.requests[-1][0]
        response = observer.responses[-1][0]
    for struct_view in (request, response):
        with pytest.raises(TypeError):
            struct_view["topics"] = ()
        with pytest.raises(AttributeError):
            struct_view.topics = ()
        with pytest.raises(TypeError):
            del struct_view["topics"]
        assert isinstance(struct_view["topics"], tuple)
        with pytest.raises(TypeError):
            struct_view["topics"][0]["name"] = "changed"
    assert [t["name"] for t in request["topics"]] == ["a", "b"]
    assert request.topics[0].name == "a"
    assert observer.mutation_errors == []


def test_observer_sees_pipelined_requests_in_order() -> None:
    with Broker({"observer.class.names": RECORDING}) as b, KafkaSocket(b.bootstrap_servers) as s:
        data = b"".join(
            struct.pack(">i", len(body)) + body
            for body in (raw_header(5000 + i % 3, 0, i) for i in range(30)))
        s.send_raw(data)
        for i in range(30):
            assert s.read_frame() == struct.pack(">i", i)
        (observer,) = RecordingObserver.instances
    assert [r[-1] for r in observer.requests] == list(range(30))
    assert [(r[3], r[4]) for r in observer.requests] == [(5000 + i % 3, 0) for i in range(30)]
    assert [r[2] for r in observer.responses] == list(range(30))


def _responses_without_observers() -> list[tuple[int | None, int, int, bytes]]:
    with Broker({"broker.id": "3", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"}) as b, \
            KafkaSocket(b.bootstrap_servers) as s:
        return _scrub(_exchange(s), b)


def _scrub(exchanged: list[tuple[int | None, int, int, bytes]], b: Broker) -> list[tuple[int | None, int, int,
                                                                                     bytes]]:
    """Responses mention the broker's port; replace it so two brokers compare equal."""
    port = int(b.bootstrap_servers.rpartition(":")[2])
    tokens = (struct.pack(">i", port), str(port).encode())
    result = []
    for key, version, cid, raw in exchanged:
        for token in tokens:
            raw = raw.replace(token, b"<port>")
        result.append((key, version, cid, raw))
    return result


def test_raising_observer_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    baseline = _responses_without_observers()
    config = {"broker.id": "3", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA",
              "observer.class.names": f"{RAISING},{RECORDING},{RAISING}"}
    with caplog.at_level(logging.ERROR, logger="kafkapy"):
        with Broker(config) as b:
            with KafkaSocket(b.bootstrap_servers) as s:
                assert _scrub(_exchange(s), b) == baseline
                assert s.call(18, 0).body["error_code"] == 0  # the connection is fine
            (recording,) = RecordingObserver.instances
    assert [r[-1] for r in recording.requests] == [11, 12, 13, 14, 15, 16, 17, 1]
    assert [r[-1] for r in recording.responses] == [11, 12, 13, 14, 15, 16, 17, 1]
    assert len(recording.closed_with) == 1  # close() reached the healthy observer too
    assert len(RaisingObserver.instances) == 2
    assert all(o.calls == 16 for o in RaisingObserver.instances)
    failures = [r.getMessage() for r in caplog.records if "RaisingObserver" in r.getMessage()]
    assert any("record_request" in m for m in failures)
    assert any("record_response" in m for m in failures)
    assert any("close" in m for m in failures)


def test_observer_sees_unknown_requests_with_close_behavior() -> None:
    config = {"observer.class.names": RECORDING, "unknown.request.behavior": "close"}
    with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as s:
        s.send_body(raw_header(4242, 1, 21))
        assert s.wait_closed() == b""
        (observer,) = RecordingObserver.instances
    assert [(r[3], r[4], r[5]) for r in observer.requests] == [(4242, 1, 21)]
    assert observer.responses == []


def test_observer_loading_errors_name_the_key() -> None:
    for path in ("observer_fixtures.NoSuchObserver", "no_such_module_xyz.Observer",
                 "observer_fixtures.RejectingObserver"):
        with pytest.raises(ConfigError, match=r"observer\.class\.names"):
            with Broker({"observer.class.names": path}):
                pass


def test_observers_closed_at_shutdown_after_in_flight_requests() -> None:
    with Broker({"observer.class.names": f"{RECORDING},{RECORDING}"}) as b:
        s = KafkaSocket(b.bootstrap_servers)
        s.call(18, 0)
    first, second = RecordingObserver.instances
    assert first.closed_with == second.closed_with and len(first.closed_with) == 1
    assert s.wait_closed() == b""  # shutdown closed the client connection
    s.close()


def test_request_and_response_calls_pair_up_across_connections() -> None:
    """KIP-388: the last argument of record_request and record_response is "an ID used to
    correspond a recordRequest method call to a recordResponse method call"; the KIP passes the
    connection id (a connection serves one request at a time). kafkapy passes the request's
    correlation id, an int, which two clients use alike; it carries the connection id as
    ``connection_id``. Here connection A's DescribeCluster (correlation id 5) is held while
    connection B's ApiVersions (also 5) is answered: by the correlation id alone the observer
    cannot tell the two responses apart, by its connection id it can."""
    with Broker({"observer.class.names": RECORDING}, modules=[HeldDescribeCluster]) as b, \
            KafkaSocket(b.bootstrap_servers) as a, KafkaSocket(b.bootstrap_servers) as other:
        a.send(60, 1, {"include_cluster_authorized_operations": False}, correlation_id=5)
        assert held(b).entered.wait(5)
        other.send(18, 3, SOFTWARE, correlation_id=5)
        assert other.read_response(18, 3).body["error_code"] == 0
        held(b).release.set()
        assert a.read_response(60, 1).body["error_code"] == 0
        (observer,) = RecordingObserver.instances
    requests = {cid.connection_id: api_key for _, _, _, api_key, _, cid in observer.requests}
    assert len(requests) == 2 and all(cid == 5 for *_, cid in observer.requests)
    answered = [(requests[cid.connection_id], response) for response, _, cid in observer.responses]
    assert [key for key, _ in answered] == [18, 60]  # ApiVersions first: it was not held
    assert "api_keys" in answered[0][1] and "brokers" in answered[1][1]
