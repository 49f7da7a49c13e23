"""Listeners as Kafka configures them: several names, ephemeral ports, advertised endpoints, SSL."""

from __future__ import annotations

import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

sys.path.insert(0, str(Path(__file__).parent))  # the broker imports observer_fixtures by name

from observer_fixtures import RecordingObserver
from server_wire import Closed, KafkaSocket, split_address

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.server.config import ConfigError
from kafkapy.server.fastpaths import FastPaths

TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
}


def _metadata_brokers(address: str, version: int = 12) -> list[tuple[int, str, int]]:
    with KafkaSocket(address) as s:
        body = s.call(3, version, {"topics": None} if version else {"topics": []}).body
    return [(b["node_id"], b["host"], b["port"]) for b in body["brokers"]]


def _bound(b: Broker) -> dict[str, str]:
    assert b.runtime is not None
    return {x.name: f"{x.host}:{x.port}" for x in b.runtime.listeners}


def test_two_listeners_with_ephemeral_ports_are_both_reported() -> None:
    with Broker(TWO_LISTENERS) as b:
        listeners = b.listeners
        assert set(listeners) == {"PLAINTEXT", "INTERNAL"}
        ports = {name: split_address(address)[1] for name, address in listeners.items()}
        assert all(port > 0 for port in ports.values()) and ports["PLAINTEXT"] != ports["INTERNAL"]
        assert b.bootstrap_servers == listeners["PLAINTEXT"]
        assert _bound(b) == listeners
        # Each listener answers with the brokers' endpoints on that same listener, as Kafka does.
        for address in listeners.values():
            host, port = split_address(address)
            assert _metadata_brokers(address) == [(b.broker_id, host, port)]
            with KafkaSocket(address) as s:
                assert s.call(18, 0).body["error_code"] == 0


def test_an_ipv6_listener_is_handed_out_bracketed_and_librdkafka_connects_over_it() -> None:
    """``Broker.listeners`` and ``bootstrap_servers`` write an IPv6 host as Kafka's listener syntax
    does, ``[::1]:port``: librdkafka takes ``::1:port`` for a host named ``::1:port`` with no port,
    and never connects."""
    from confluent_kafka import Producer

    config = {"listeners": "V6://[::1]:0,PLAINTEXT://127.0.0.1:0",
              "listener.security.protocol.map": "V6:PLAINTEXT,PLAINTEXT:PLAINTEXT",
              "inter.broker.listener.name": "V6"}
    with Broker(config) as b:
        assert b.runtime is not None
        port = b.runtime.listeners[0].port
        assert b.listeners["V6"] == f"[::1]:{port}" == b.bootstrap_servers
        assert b.listeners["PLAINTEXT"] == f"127.0.0.1:{b.runtime.listeners[1].port}"
        with KafkaSocket(b.bootstrap_servers) as s:  # kafkapy's own parsers take it too
            assert s.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}).body[
                "error_code"] == 0
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "over-v6",
                             "socket.timeout.ms": 5000, "message.timeout.ms": 10000})
        delivered: list[object] = []
        producer.produce("v6-topic", b"x", on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(15) == 0
        assert delivered == [None]
        assert [r.value for r in b.records("v6-topic")] == [b"x"]


def test_inter_broker_listener_defaults_to_plaintext_and_can_be_named() -> None:
    with Broker(TWO_LISTENERS) as b:
        assert b.runtime is not None and b.runtime.inter_broker_listener == "PLAINTEXT"
    with Broker({**TWO_LISTENERS, "inter.broker.listener.name": "internal"}) as b:
        assert b.runtime is not None and b.runtime.inter_broker_listener == "INTERNAL"


@pytest.mark.parametrize(("settings", "key"), [
    ({**TWO_LISTENERS, "inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0"}, "listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"}, "listeners"),
    # Kafka's default sasl.enabled.mechanisms is GSSAPI, which kafkapy does not serve.
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "sasl.enabled.mechanisms"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "sasl.jaas.config"),
    ({"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'},
     "ssl.certfile"),
    ({"advertised.listeners": "EXTERNAL://example.com:9092"}, "advertised.listeners"),
    ({"listeners": "SSL://127.0.0.1:0"}, "ssl.certfile"),
])
def test_listener_configuration_errors_name_the_key(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        with Broker(settings):
            pass


def test_advertised_listeners_show_in_metadata() -> None:
    settings = {**TWO_LISTENERS,
                "advertised.listeners": "PLAINTEXT://kafka.example.com:19092,INTERNAL://127.0.0.1:0"}
    with Broker(settings) as b:
        bound = _bound(b)
        assert b.listeners["PLAINTEXT"] == "kafka.example.com:19092"
        # INTERNAL is advertised with port 0: the port actually bound is reported.
        assert b.listeners["INTERNAL"] == bound["INTERNAL"]
        assert _metadata_brokers(bound["PLAINTEXT"]) == [(b.broker_id, "kafka.example.com", 19092)]
        assert _metadata_brokers(bound["PLAINTEXT"], 0) == [(b.broker_id, "kafka.example.com", 19092)]
        host, port = split_address(bound["INTERNAL"])
        assert _metadata_brokers(bound["INTERNAL"]) == [(b.broker_id, host, port)]
        with KafkaSocket(bound["PLAINTEXT"]) as s:
            brokers = s.call(60, 0, {}).body["brokers"]
            assert [(x["host"], x["port"]) for x in brokers] == [("kafka.example.com", 19092)]
            (entry,) = s.call(1010, 0, {"node_ids": [-1]}).body["brokers"]
            tags = {t["key"]: t["value"] for t in entry["tags"]}
            assert "plaintext://kafka.example.com:19092" in tags["endpoints"]


def test_a_listener_left_out_of_advertised_listeners_is_served_and_not_advertised() -> None:
    """Kafka's advertised.listeners, when set, is the whole list advertised: INTERNAL is bound and
    answers, but no broker has an endpoint on it, so a Metadata request arriving on it lists no
    broker, and the partition's leader is -1 with LISTENER_NOT_FOUND (v6 on; LEADER_NOT_AVAILABLE
    before) and an offline replica, as Kafka's MetadataCache answers. kafkapy advertised INTERNAL at
    its bound address, one listener at a time."""
    from confluent_kafka.admin import AdminClient

    with Broker({**TWO_LISTENERS, "advertised.listeners": "PLAINTEXT://127.0.0.1:0"}) as b:
        b.seed({"t": {"partitions": 1}})
        bound = _bound(b)
        assert b.listeners == bound and b.bootstrap_servers == bound["PLAINTEXT"]
        host, port = split_address(bound["PLAINTEXT"])
        assert _metadata_brokers(bound["PLAINTEXT"]) == [(b.broker_id, host, port)]
        assert _metadata_brokers(bound["INTERNAL"]) == []
        with KafkaSocket(bound["INTERNAL"]) as s:
            for version, error in ((12, ErrorCode.LISTENER_NOT_FOUND), (6, ErrorCode.LISTENER_NOT_FOUND),
                                   (5, ErrorCode.LEADER_NOT_AVAILABLE)):
                (topic,) = s.call(3, version, {"topics": [{"name": "t"}]}).body["topics"]
                (partition,) = topic["partitions"]
                assert (partition["error_code"], partition["leader_id"], partition["replica_nodes"],
                        partition["isr_nodes"], partition["offline_replicas"]) == (
                    error, -1, [b.broker_id], [b.broker_id], [b.broker_id])
            assert s.call(60, 0, {}).body["brokers"] == []  # DescribeCluster: the same brokers
        with KafkaSocket(bound["PLAINTEXT"]) as s:
            (topic,) = s.call(3, 12, {"topics": [{"name": "t"}]}).body["topics"]
            assert [(p["error_code"], p["leader_id"]) for p in topic["partitions"]] == [(0, b.broker_id)]
        metadata = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=10)
        assert [str(x) for x in metadata.brokers.values()] == [f"{bound['PLAINTEXT']}/{b.broker_id}"]


@pytest.mark.parametrize(("settings", "message"), [
    ({"advertised.listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://example.com:9092",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"},
     "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. "
     "Found PLAINTEXT,EXTERNAL. The valid options based on the current configuration are PLAINTEXT"),
    ({**TWO_LISTENERS, "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
      "inter.broker.listener.name": "INTERNAL"},
     "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
     "The valid options based on currently configured listeners are PLAINTEXT"),
    ({**TWO_LISTENERS, "advertised.listeners": ""}, "There must be at least one broker advertised listener."),
])
def test_advertised_listeners_are_checked_in_kafkas_words(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused, Broker(settings):
        pass
    assert str(refused.value) == message


def test_an_empty_listener_host_is_advertised_as_the_machines_name_as_in_kafka() -> None:
    """listeners=PLAINTEXT://:9092 (Kafka's default, and its KRaft example's) binds every interface
    and Kafka advertises the machine's canonical name; kafkapy told clients to connect to 0.0.0.0,
    which only a client on the same machine can. An advertised 0.0.0.0 is refused in Kafka's words."""
    import socket

    with Broker({"listeners": "PLAINTEXT://:0"}) as b:
        host, port = split_address(b.listeners["PLAINTEXT"])
        assert host == socket.getfqdn() != "0.0.0.0"
        assert _metadata_brokers(f"127.0.0.1:{port}") == [(b.broker_id, host, port)]
    for settings in ({"listeners": "PLAINTEXT://0.0.0.0:0"},
                     {"listeners": "PLAINTEXT://:0", "advertised.listeners": "PLAINTEXT://0.0.0.0:0"}):
        with pytest.raises(ConfigError) as refused, Broker(settings):
            pass
        assert str(refused.value) == ("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                      "Use a routable IP address.")
    everywhere_told_one = {"listeners": "PLAINTEXT://0.0.0.0:0", "advertised.listeners": "PLAINTEXT://127.0.0.1:0"}
    with Broker(everywhere_told_one) as b:
        assert split_address(b.listeners["PLAINTEXT"])[0] == "127.0.0.1"
    # a listener advertised.listeners leaves out is not advertised: its 0.0.0.0 is no refusal
    internal_only = {**TWO_LISTENERS, "listeners": "PLAINTEXT://0.0.0.0:0,INTERNAL://127.0.0.1:0",
                     "advertised.listeners": "INTERNAL://127.0.0.1:0",
                     "inter.broker.listener.name": "INTERNAL"}
    with Broker(internal_only) as b:
        assert split_address(b.listeners["PLAINTEXT"])[0] == "0.0.0.0"
        host, port = split_address(b.listeners["INTERNAL"])
        assert _metadata_brokers(b.listeners["INTERNAL"]) == [(b.broker_id, host, port)]


# --- SSL ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pem_files(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("pem")
    server = ca.issue_cert("127.0.0.1", "localhost")
    paths = {"ssl.certfile": directory / "server.pem", "ssl.keyfile": directory / "server.key",
             "ssl.cafile": directory / "ca.pem"}
    paths["ssl.certfile"].write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(paths["ssl.keyfile"]))
    ca.cert_pem.write_to_path(str(paths["ssl.cafile"]))
    return {key: str(path) for key, path in paths.items()}


SSL_LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}


@pytest.fixture(autouse=True)
def fresh_observers() -> Iterator[None]:
    RecordingObserver.instances.clear()
    yield
    RecordingObserver.instances.clear()


def _client_context(ca: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    if cert is not None:
        cert.configure_cert(context)
    return context


def test_ssl_listener_serves_a_tls_client(ca: trustme.CA, pem_files: dict[str, str]) -> None:
    config = {**SSL_LISTENERS, **pem_files, "observer.class.names": "observer_fixtures.RecordingObserver"}
    with Broker(config) as b:
        assert set(b.listeners) == {"PLAINTEXT", "SSL"}
        address = b.listeners["SSL"]
        with KafkaSocket(address, ssl_context=_client_context(ca)) as s:
            assert isinstance(s.sock, ssl.SSLSocket) and s.sock.version() is not None
            body = s.call(18, 3, {"client_software_name": "tls-test", "client_software_version": "1"}).body
            assert body["error_code"] == 0 and {k["api_key"] for k in body["api_keys"]} >= {3, 18, 60}
            host, port = split_address(address)
            brokers = s.call(3, 12, {"topics": None}).body["brokers"]
            assert [(x["host"], x["port"]) for x in brokers] == [(host, port)]
        (observer,) = RecordingObserver.instances
        assert observer.requests[0][2] == "User:ANONYMOUS"  # no client auth: anonymous
        # The PLAINTEXT listener is not TLS.
        with KafkaSocket(b.listeners["PLAINTEXT"]) as s:
            assert s.call(18, 0).body["error_code"] == 0


def test_ssl_client_auth_required_principal_is_the_certificate_subject(
        ca: trustme.CA, pem_files: dict[str, str]) -> None:
    client = ca.issue_cert("client.example.com", common_name="alice", organization_name="Acme",
                           organization_unit_name="Streams")
    config = {**SSL_LISTENERS, **pem_files, "ssl.client.auth": "required",
              "observer.class.names": "observer_fixtures.RecordingObserver"}
    with Broker(config) as b:
        address = b.listeners["SSL"]
        with KafkaSocket(address, ssl_context=_client_context(ca, client)) as s:
            assert s.call(18, 0).body["error_code"] == 0
            s.send_raw(b"\x00\x00\x00\x08\x13\x88\x00\x00\x00\x00\x00\x07")  # unknown key 5000
            assert s.read_frame() == b"\x00\x00\x00\x07"
        (observer,) = RecordingObserver.instances
        principals = {r[2] for r in observer.requests}
        # Kafka's default principal: the subject as an RFC 2253 distinguished name.
        assert principals == {"User:CN=alice,OU=Streams,O=Acme"}
        # Without a client certificate the handshake (or the first read) fails.
        with pytest.raises((ssl.SSLError, ConnectionError, Closed, OSError)):
            with KafkaSocket(address, ssl_context=_client_context(ca)) as s:
                s.call(18, 0)
        with KafkaSocket(b.listeners["PLAINTEXT"]) as s:  # the other listener is unaffected
            assert s.call(18, 0).body["error_code"] == 0


def test_ssl_client_auth_requested_accepts_both(ca: trustme.CA, pem_files: dict[str, str]) -> None:
    client = ca.issue_cert("bob.example.com", common_name="bob")
    config = {**SSL_LISTENERS, **pem_files, "ssl.client.auth": "requested",
              "observer.class.names": "observer_fixtures.RecordingObserver"}
    with Broker(config) as b:
        address = b.listeners["SSL"]
        with KafkaSocket(address, ssl_context=_client_context(ca, client)) as s:
            s.call(18, 0)
        with KafkaSocket(address, ssl_context=_client_context(ca)) as s:
            s.call(18, 0)
        (observer,) = RecordingObserver.instances
        principals = [r[2] for r in observer.requests]
        assert principals[0].startswith("User:CN=bob,")
        assert principals[1] == "User:ANONYMOUS"


def test_plaintext_client_on_the_ssl_listener_is_closed(ca: trustme.CA, pem_files: dict[str, str]) -> None:
    with Broker({**SSL_LISTENERS, **pem_files}) as b:
        with KafkaSocket(b.listeners["SSL"]) as s:
            s.send_raw(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
            assert not s.wait_closed().startswith(b"\x00\x00\x00")  # no Kafka frame, just TLS noise or EOF
        with KafkaSocket(b.listeners["SSL"], ssl_context=_client_context(ca)) as s:
            assert s.call(18, 0).body["error_code"] == 0


def test_ssl_with_bad_pem_files_fails_at_start(tmp_path: Path, pem_files: dict[str, str]) -> None:
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"ssl\.certfile"):
        with Broker({**SSL_LISTENERS, **pem_files, "ssl.certfile": str(bogus)}):
            pass
    with pytest.raises(ConfigError, match=r"ssl\.keyfile"):
        with Broker({**SSL_LISTENERS, **pem_files, "ssl.keyfile": str(tmp_path / "missing.key")}):
            pass



def test_an_ssl_listener_with_kafkas_keystore_file_missing_names_it() -> None:
    """A server.properties written for Kafka names its keystore and truststore (JKS or PKCS12:
    tests/server/test_tls_stores.py reads them); one that is not there is named in Kafka's words."""
    with pytest.raises(ConfigError) as refused:
        with Broker({**SSL_LISTENERS, "ssl.keystore.location": "/etc/kafka/broker.jks",
                     "ssl.keystore.password": "secret", "ssl.truststore.location": "/etc/kafka/ca.jks"}):
            pass
    assert str(refused.value) == (
        "invalid SSL settings for listener SSL: Failed to load SSL keystore /etc/kafka/broker.jks of type "
        "JKS: No such file or directory")
    needs = r"^an SSL or SASL_SSL listener \(SSL\) needs its certificate and key"
    with pytest.raises(ConfigError, match=needs):
        with Broker(SSL_LISTENERS):
            pass


def test_principal_formatting_follows_rfc2253() -> None:
    from kafkapy.server.connection import rfc2253

    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
               (("commonName", " #odd+name"), ("userId", "u1")))
    assert rfc2253(subject) == "CN=\\ #odd\\+name+UID=u1,O=Acme\\, Inc,C=US"


@pytest.mark.parametrize("in_place", [True, False], ids=["in place", "connect_accepted_socket"])
def test_plaintext_connections_are_served_with_and_without_an_in_place_transport(in_place: bool) -> None:
    """On asyncio's selector loops an accepted plaintext socket gets its transport at once; on a
    loop with no way to do that, loop.connect_accepted_socket in a task does it. Both serve, and
    both give the connection slot back when the client goes."""
    with Broker(fast_paths=FastPaths(in_place_accept=in_place)) as b:
        assert b.runtime is not None and (b.runtime._make_transport is not None) == in_place
        for _ in range(3):
            with KafkaSocket(b.bootstrap_servers) as s:
                assert s.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}).body[
                    "error_code"] == 0
        quotas = next(m for m in b.runtime.modules if m.name == "quotas").connection_quotas  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while quotas.total and time.monotonic() < deadline:
            time.sleep(0.01)
        assert quotas.total == 0
