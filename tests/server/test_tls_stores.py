"""Kafka's PEM key and trust stores (KIP-651) on TLS listeners: files, inline PEM, encrypted keys,
client certificates, and Kafka's refusals in its words."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Producer
from cryptography.hazmat.primitives import serialization
from server_wire import Closed, KafkaSocket

from kafkapy import Broker
from kafkapy.server.config import ConfigError
from tests.server.test_environment import serve_environment
from tests.test_cli import Served

TIMEOUT_S = 20
PASSWORD = "key-secret"


def _pkcs8(leaf: trustme.LeafCert, password: str | None = None) -> str:
    """The leaf's key as Kafka reads one: PKCS#8, encrypted with ``password`` if given."""
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    return pem.decode()


def _chain(leaf: trustme.LeafCert) -> str:
    return "".join(blob.bytes().decode() for blob in leaf.cert_chain_pems)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def client(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("client@example.com", common_name="client")


@pytest.fixture
def keystore_file(server: trustme.LeafCert, tmp_path: Path) -> str:
    path = tmp_path / "broker.pem"
    path.write_text(_pkcs8(server) + _chain(server))
    return str(path)


TLS = {"listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL"}


def _versions_over_tls(broker: Broker, ca: trustme.CA, leaf: trustme.LeafCert | None = None) -> str:
    """ApiVersions answered over TLS; the principal the broker gave the connection meanwhile."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    if leaf is not None:
        leaf.configure_cert(context)
    with KafkaSocket(broker.listeners["SSL"], ssl_context=context) as s:
        body = s.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}).body
        assert body["error_code"] == 0 and isinstance(s.sock, ssl.SSLSocket)
        (connection,) = [c for c in broker.connections() if c.listener == "SSL"]  # this one, still open
        return connection.principal


def test_a_pem_keystore_file_serves_tls(ca: trustme.CA, keystore_file: str) -> None:
    with Broker({**TLS, "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore_file}) as broker:
        assert _versions_over_tls(broker, ca) == "User:ANONYMOUS"


def test_an_inline_chain_and_key_serve_tls_as_written_in_a_file_or_on_one_line(
        ca: trustme.CA, server: trustme.LeafCert) -> None:
    chain, key = _chain(server), _pkcs8(server)
    for written in (lambda pem: pem, lambda pem: " ".join(pem.split("\n"))):  # a .properties continuation
        settings = {**TLS, "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": written(chain),
                    "ssl.keystore.key": written(key)}
        with Broker(settings) as broker:
            _versions_over_tls(broker, ca)


def test_an_encrypted_key_is_read_with_ssl_key_password(ca: trustme.CA, server: trustme.LeafCert) -> None:
    settings = {**TLS, "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": _chain(server),
                "ssl.keystore.key": _pkcs8(server, PASSWORD), "ssl.key.password": PASSWORD}
    with Broker(settings) as broker:
        _versions_over_tls(broker, ca)
    assert _refusal({**settings, "ssl.key.password": "wrong"}).endswith(
        "Invalid PEM keystore configs: the private key cannot be decrypted with ssl.key.password")
    assert _refusal({**settings, "ssl.key.password": None}).endswith(
        "Invalid PEM keystore configs: Private key could not be loaded: a ENCRYPTED PRIVATE KEY where Kafka "
        "reads a PKCS#8 PRIVATE KEY (openssl pkcs8 -topk8 converts one)")


def test_a_pem_truststore_checks_client_certificates_and_names_the_principal(
        ca: trustme.CA, client: trustme.LeafCert, keystore_file: str, tmp_path: Path) -> None:
    trusted = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(trusted))
    keystore = {"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore_file,
                "ssl.client.auth": "required"}
    for truststore in ({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(trusted)},
                       {"ssl.truststore.type": "PEM",
                        "ssl.truststore.certificates": ca.cert_pem.bytes().decode()}):
        with Broker({**TLS, **keystore, **truststore}) as broker:
            assert _versions_over_tls(broker, ca, client).startswith("User:CN=client,OU=Testing cert")
            with pytest.raises((ssl.SSLError, ConnectionError, Closed)):  # TLS 1.3: at the first read
                _versions_over_tls(broker, ca)  # no client certificate: refused


def test_a_listener_prefixed_store_wins(ca: trustme.CA, keystore_file: str) -> None:
    settings = {**TLS, "listener.name.ssl.ssl.keystore.type": "PEM",
                "listener.name.ssl.ssl.keystore.location": keystore_file,
                "ssl.keystore.location": "/nowhere/broker.jks"}  # overridden key by key, as in Kafka
    with Broker(settings) as broker:
        _versions_over_tls(broker, ca)


def _refusal(settings: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as refused:
        with Broker({k: v for k, v in settings.items() if v is not None}):
            pass
    return str(refused.value)


@pytest.mark.parametrize(("settings", "reason"), [
    ({"ssl.keystore.key": "k"}, "SSL private key can be specified only for PEM, but key store type is JKS."),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "k"},
     "SSL private key is specified, but certificate chain is not specified."),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c",
      "ssl.keystore.location": "/a.pem"},
     "Both SSL key store location and separate private key are specified."),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c",
      "ssl.keystore.password": "p"},
     "SSL key store password cannot be specified with PEM format, only key password may be specified."),
    ({"ssl.keystore.certificate.chain": "c"},
     "SSL certificate chain is specified, but private key is not specified"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/a.pem", "ssl.keystore.password": "p"},
     "SSL key store password cannot be specified with PEM format, only key password may be specified"),
    ({"ssl.keystore.password": "p"}, "SSL key store is not specified, but key store password is specified."),
    ({"ssl.keystore.location": "/etc/kafka/secrets/kafka01.keystore.jks"},
     "SSL key store is specified, but key store password is not specified."),
    ({"ssl.keystore.location": "/etc/kafka/secrets/kafka01.keystore.jks", "ssl.keystore.password": "p"},
     "Failed to load SSL keystore /etc/kafka/secrets/kafka01.keystore.jks of type JKS: "
     "No such file or directory"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "c",
      "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"},
     "Invalid PEM keystore configs: No matching CERTIFICATE entries in PEM file"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----",  # a cut value
      "ssl.keystore.certificate.chain": "c"},
     "Invalid PEM keystore configs: No matching PRIVATE KEY entries in PEM file"),
], ids=["key-not-pem", "key-without-chain", "key-and-location", "key-and-password", "chain-without-key",
        "pem-file-and-password", "password-without-store", "store-without-password", "no-file",
        "no-certificate",
        "no-key"])
def test_kafkas_key_store_refusals_in_its_words(settings: dict[str, str], reason: str) -> None:
    assert _refusal({**TLS, **settings}) == f"invalid SSL settings for listener SSL: {reason}"


@pytest.mark.parametrize(("settings", "reason"), [
    ({"ssl.truststore.certificates": "c"},
     "SSL trust store certs can be specified only for PEM, but trust store type is JKS."),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "c", "ssl.truststore.location": "/ca.pem"},
     "Both SSL trust store location and separate trust certificates are specified."),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "c", "ssl.truststore.password": "p"},
     "SSL trust store password cannot be specified for PEM format."),
    ({"ssl.truststore.password": "p"},
     "SSL trust store is not specified, but trust store password is specified."),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"},
     "No matching CERTIFICATE entries in PEM file"),
    ({"ssl.truststore.location": "/etc/kafka/secrets/kafka.truststore.jks", "ssl.truststore.password": "p"},
     "Failed to load SSL keystore /etc/kafka/secrets/kafka.truststore.jks of type JKS: "
     "No such file or directory"),
], ids=["certs-not-pem", "certs-and-location", "certs-and-password", "password-without-store",
        "no-certificate", "no-file"])
def test_kafkas_trust_store_refusals_in_its_words(keystore_file: str, settings: dict[str, str],
                                                  reason: str) -> None:
    keystore = {"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore_file}
    assert _refusal({**TLS, **keystore, **settings}) == f"invalid SSL settings for listener SSL: {reason}"


def test_a_pkcs1_key_kafka_cannot_read_is_refused(server: trustme.LeafCert, tmp_path: Path) -> None:
    path = tmp_path / "traditional.pem"
    path.write_bytes(server.private_key_pem.bytes() + _chain(server).encode())
    assert _refusal({**TLS, "ssl.keystore.type": "PEM", "ssl.keystore.location": str(path)}) == (
        f"invalid SSL settings for listener SSL: Failed to load PEM SSL keystore {path}: Private key could "
        "not be loaded: a EC PRIVATE KEY where Kafka reads a PKCS#8 PRIVATE KEY (openssl pkcs8 -topk8 "
        "converts one)")


def test_both_kinds_of_settings_are_refused(keystore_file: str) -> None:
    assert "both ssl.certfile and Kafka's ssl.keystore.*" in _refusal(
        {**TLS, "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore_file,
         "ssl.certfile": keystore_file})
    assert _refusal(TLS).startswith("an SSL or SASL_SSL listener (SSL) needs its certificate and key")


# --- kafkapy serve with a server.properties written for Kafka, and real clients over mTLS -----------

def _continued(pem: str) -> str:
    """PEM as a .properties value: one logical line continued with backslashes, as Kafka's docs write it."""
    return " \\\n    ".join(pem.strip().split("\n"))


@pytest.fixture
def mtls_broker(ca: trustme.CA, server: trustme.LeafCert, tmp_path: Path) -> Iterator[str]:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listeners=SSL://127.0.0.1:0\nlistener.security.protocol.map=SSL:SSL\n"
        "inter.broker.listener.name=SSL\nssl.client.auth=required\n"
        "ssl.keystore.type=PEM\nssl.truststore.type=PEM\n"
        f"ssl.keystore.certificate.chain={_continued(_chain(server))}\n"
        f"ssl.keystore.key={_continued(_pkcs8(server, PASSWORD))}\nssl.key.password={PASSWORD}\n"
        f"ssl.truststore.certificates={_continued(ca.cert_pem.bytes().decode())}\n", encoding="utf-8")
    served = Served("--config", str(properties))
    try:
        name, host, port = served.wait_listening()
        assert name == "SSL"
        yield f"{host}:{port}"
        assert served.stop() == 0
    finally:
        served.kill()


@pytest.fixture
def client_files(ca: trustme.CA, client: trustme.LeafCert, tmp_path: Path) -> dict[str, str]:
    paths = {"ca": tmp_path / "ca.pem", "certificate": tmp_path / "client.pem",
             "key": tmp_path / "client.key"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    paths["certificate"].write_text(_chain(client))
    paths["key"].write_text(_pkcs8(client))
    return {name: str(path) for name, path in paths.items()}


def test_confluent_kafka_and_kcat_over_mtls_against_kafkapy_serve(mtls_broker: str,
                                                                  client_files: dict[str, str]) -> None:
    producer = Producer({"bootstrap.servers": mtls_broker, "security.protocol": "SSL",
                         "ssl.ca.location": client_files["ca"],
                         "ssl.certificate.location": client_files["certificate"],
                         "ssl.key.location": client_files["key"]})
    producer.produce("over-mtls", b"v")
    assert producer.flush(TIMEOUT_S) == 0
    kcat = ["kcat", "-b", mtls_broker, "-X", "security.protocol=ssl",
            "-X", f"ssl.ca.location={client_files['ca']}",
            "-X", f"ssl.certificate.location={client_files['certificate']}",
            "-X", f"ssl.key.location={client_files['key']}"]
    consumed = subprocess.run([*kcat, "-C", "-t", "over-mtls", "-e", "-o", "beginning"], capture_output=True,
                              text=True, timeout=60)
    assert consumed.returncode == 0 and consumed.stdout.split() == ["v"], consumed.stderr
    anonymous = subprocess.run(["kcat", "-b", mtls_broker, "-X", "security.protocol=ssl", "-X",
                                f"ssl.ca.location={client_files['ca']}", "-L", "-m", "5"],
                               capture_output=True, text=True, timeout=60)
    assert anonymous.returncode != 0  # no client certificate: the handshake is refused


def test_a_docker_compose_ssl_node_from_the_environment(keystore_file: str, ca: trustme.CA,
                                                        client_files: dict[str, str]) -> None:
    """``serve --env`` with the image's settings for an SSL listener, a PEM key store file and the
    trusted CA inline on one line (a multi-line variable would be cut at its first line, as the
    image's server.properties cuts it)."""
    one_line = " ".join(ca.cert_pem.bytes().decode().strip().split("\n"))
    environment = serve_environment(
        KAFKA_LISTENERS="SSL://127.0.0.1:0", KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="SSL:SSL",
        KAFKA_INTER_BROKER_LISTENER_NAME="SSL", KAFKA_SSL_KEYSTORE_TYPE="PEM",
        KAFKA_SSL_KEYSTORE_LOCATION=keystore_file, KAFKA_SSL_CLIENT_AUTH="required",
        KAFKA_SSL_TRUSTSTORE_TYPE="PEM", KAFKA_SSL_TRUSTSTORE_CERTIFICATES=one_line)
    served = Served("--env", env=environment)
    try:
        _, host, port = served.wait_listening()
        producer = Producer({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SSL",
                             "ssl.ca.location": client_files["ca"],
                             "ssl.certificate.location": client_files["certificate"],
                             "ssl.key.location": client_files["key"]})
        producer.produce("from-env-over-tls", b"v")
        assert producer.flush(TIMEOUT_S) == 0
        assert served.stop() == 0
    finally:
        served.kill()


def test_a_sasl_ssl_listener_takes_its_own_pem_store(server: trustme.LeafCert,
                                                     client_files: dict[str, str]) -> None:
    """A SASL_SSL listener's store under its listener prefix; librdkafka logs in with PLAIN inside TLS."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" '
            'user_alice="secret";')
    settings = {"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": jaas,
                "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
                "listener.name.sasl_ssl.ssl.keystore.certificate.chain": _chain(server),
                "listener.name.sasl_ssl.ssl.keystore.key": _pkcs8(server)}
    with Broker(settings) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_SSL",
                             "ssl.ca.location": client_files["ca"], "sasl.mechanism": "PLAIN",
                             "sasl.username": "alice", "sasl.password": "secret"})
        producer.produce("sasl-over-pem", b"v")
        assert producer.flush(TIMEOUT_S) == 0
        assert [r.value for r in broker.records("sasl-over-pem")] == [b"v"]


# --- ssl.client.auth per listener -----------------------------------------------------------------

def _delivered(producer: Producer, topic: str) -> list[object]:
    """What librdkafka's delivery reports said of one record sent."""
    reports: list[object] = []
    producer.produce(topic, b"v", on_delivery=lambda error, _: reports.append(error))
    producer.flush(TIMEOUT_S)
    return reports


def test_ssl_client_auth_per_listener_as_kafka_reads_it(ca: trustme.CA, keystore_file: str,
                                                        client_files: dict[str, str]) -> None:
    """listener.name.mtls.ssl.client.auth=required asks MTLS's clients for a certificate, and TLS, with
    the plain key's none, accepts a client without one (kafkapy applied the plain key to every SSL
    listener). librdkafka with a certificate on one, without on the other; kcat without on MTLS."""
    settings = {"listeners": "MTLS://127.0.0.1:0,TLS://127.0.0.1:0",
                "listener.security.protocol.map": "MTLS:SSL,TLS:SSL", "inter.broker.listener.name": "TLS",
                "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore_file,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": client_files["ca"],
                "listener.name.mtls.ssl.client.auth": "required"}
    with Broker(settings) as broker:
        with_certificate = Producer({
            "bootstrap.servers": broker.listeners["MTLS"], "security.protocol": "SSL",
            "ssl.ca.location": client_files["ca"], "ssl.certificate.location": client_files["certificate"],
            "ssl.key.location": client_files["key"]})
        without = Producer({"bootstrap.servers": broker.listeners["TLS"], "security.protocol": "SSL",
                            "ssl.ca.location": client_files["ca"]})
        assert _delivered(with_certificate, "mtls") == _delivered(without, "tls") == [None]
        principals = {c.listener: c.principal for c in broker.connections()}
        assert principals["MTLS"].startswith("User:CN=client,OU=Testing cert")
        assert principals["TLS"] == "User:ANONYMOUS"
        anonymous = subprocess.run(["kcat", "-b", broker.listeners["MTLS"], "-X", "security.protocol=ssl",
                                    "-X", f"ssl.ca.location={client_files['ca']}", "-L", "-m", "5"],
                                   capture_output=True, text=True, timeout=60)
        assert anonymous.returncode != 0  # no client certificate: MTLS refuses the handshake
        assert sorted(r.value for r in broker.records("mtls") + broker.records("tls")) == [b"v", b"v"]


def test_a_sasl_ssl_listener_asks_for_certificates_only_by_its_own_key(
        ca: trustme.CA, client: trustme.LeafCert, keystore_file: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ChannelBuilders: SASL authenticates a SASL_SSL listener's clients, so the plain
    ssl.client.auth is not applied to it (with Kafka's warning); its listener-prefixed key is."""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";'
    settings = {"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": jaas,
                "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore_file,
                "ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
                "ssl.client.auth": "required"}

    def versions(broker: Broker, leaf: trustme.LeafCert | None) -> int:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        if leaf is not None:
            leaf.configure_cert(context)
        with KafkaSocket(broker.bootstrap_servers, ssl_context=context) as s:
            return int(s.call(18, 0).body["error_code"])

    with Broker(settings) as broker:
        assert versions(broker, None) == 0
    assert "is applied only to SSL listeners. Listener-prefixed configuration can be used" in caplog.text
    with Broker({**settings, "listener.name.sasl_ssl.ssl.client.auth": "required"}) as broker:
        assert versions(broker, client) == 0
        with pytest.raises((ssl.SSLError, ConnectionError, Closed)):
            versions(broker, None)


def test_a_listeners_ssl_client_auth_is_checked_as_the_plain_key(keystore_file: str) -> None:
    settings = {**TLS, "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore_file,
                "listener.name.ssl.ssl.client.auth": "always"}
    assert _refusal(settings) == ("Invalid value always for configuration ssl.client.auth: "
                                  "String must be one of: required, requested, none")


# --- Java stores: PKCS12 (keytool's format since Java 9, whatever the file's name), JKS refused ------

def _pkcs12(path: Path, leaf: trustme.LeafCert | None, trusted: list[trustme.CA], password: str) -> str:
    """A PKCS12 store as keytool writes one: a key entry (``leaf``) or trusted certificates."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = cert = None
    if leaf is not None:
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
        cert = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    cas = [x509.load_pem_x509_certificate(ca.cert_pem.bytes()) for ca in trusted]
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        b"kafka", key, cert, cas or None, serialization.BestAvailableEncryption(password.encode())))
    return str(path)


def test_pkcs12_stores_named_jks_serve_mtls_as_the_images_example_ones(
        ca: trustme.CA, server: trustme.LeafCert, client: trustme.LeafCert, tmp_path: Path) -> None:
    """The apache/kafka image's example keystores are PKCS12 files named *.jks, with the default
    ssl.keystore.type JKS (Java 9+ reads PKCS12 as JKS): so are these."""
    keystore = _pkcs12(tmp_path / "kafka01.keystore.jks", server, [], "abcdefgh")
    truststore = _pkcs12(tmp_path / "kafka.truststore.jks", None, [ca], "abcdefgh")
    settings = {**TLS, "ssl.keystore.location": keystore, "ssl.keystore.password": "abcdefgh",
                "ssl.key.password": "abcdefgh", "ssl.truststore.location": truststore,
                "ssl.truststore.password": "abcdefgh", "ssl.client.auth": "required"}
    with Broker(settings) as broker:
        assert _versions_over_tls(broker, ca, client).startswith("User:CN=client")
    with Broker({**settings, "ssl.keystore.type": "PKCS12", "ssl.truststore.type": "PKCS12"}) as broker:
        _versions_over_tls(broker, ca, client)
    wrong = _refusal({**settings, "ssl.keystore.password": "wrong"})
    assert wrong.startswith("invalid SSL settings for listener SSL: Failed to load SSL keystore "
                            f"{keystore} of type JKS: ")
    assert _refusal({**settings, "ssl.truststore.type": "BKS"}) == (
        f"invalid SSL settings for listener SSL: Failed to load SSL keystore {truststore} of type BKS: "
        "ssl.truststore.type BKS is not one kafkapy reads (PEM, PKCS12, or JKS holding PKCS12)")


def test_a_keystore_in_javas_own_jks_format_is_refused_naming_the_conversion(tmp_path: Path) -> None:
    path = tmp_path / "old.jks"
    path.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")  # JKS magic and version, as keytool -storetype JKS
    assert _refusal({**TLS, "ssl.keystore.location": str(path), "ssl.keystore.password": "p"}) == (
        f"invalid SSL settings for listener SSL: Failed to load SSL keystore {path} of type JKS: it is in "
        f"Java's JKS format, which kafkapy cannot read: convert it to PKCS12 (keytool -importkeystore "
        f"-srckeystore {path} -deststoretype PKCS12) or to PEM (ssl.keystore.type=PEM)")


def test_the_images_ssl_secrets_convention_from_the_environment(
        ca: trustme.CA, server: trustme.LeafCert, client: trustme.LeafCert, tmp_path: Path) -> None:
    """The apache/kafka image's SSL example (docker/examples, single-node/ssl): stores and password
    files named by KAFKA_SSL_*_FILENAME / *_CREDENTIALS under its secrets directory."""
    from kafkapy.server.environment import settings_from_environment

    _pkcs12(tmp_path / "kafka01.keystore.jks", server, [], "abcdefgh")
    _pkcs12(tmp_path / "kafka.truststore.jks", None, [ca], "abcdefgh")
    for name in ("kafka_keystore_creds", "kafka_ssl_key_creds", "kafka_truststore_creds"):
        (tmp_path / name).write_text("abcdefgh\n")
    environ = {"KAFKA_NODE_ID": "1", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "SSL:SSL",
               "KAFKA_LISTENERS": "SSL://127.0.0.1:0", "KAFKA_ADVERTISED_LISTENERS": "SSL://127.0.0.1:0",
               "KAFKA_INTER_BROKER_LISTENER_NAME": "SSL",
               "KAFKA_SSL_KEYSTORE_FILENAME": "kafka01.keystore.jks",
               "KAFKA_SSL_KEYSTORE_CREDENTIALS": "kafka_keystore_creds",
               "KAFKA_SSL_KEY_CREDENTIALS": "kafka_ssl_key_creds",
               "KAFKA_SSL_TRUSTSTORE_FILENAME": "kafka.truststore.jks",
               "KAFKA_SSL_TRUSTSTORE_CREDENTIALS": "kafka_truststore_creds",
               "KAFKA_SSL_CLIENT_AUTH": "required", "KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": ""}
    settings = settings_from_environment(environ, None, secrets=str(tmp_path))
    assert settings["ssl.keystore.location"] == str(tmp_path / "kafka01.keystore.jks")
    assert settings["ssl.keystore.password"] == settings["ssl.key.password"] == "abcdefgh"
    assert settings["ssl.truststore.location"] == str(tmp_path / "kafka.truststore.jks")
    with Broker(settings) as broker:
        assert _versions_over_tls(broker, ca, client).startswith("User:CN=client")
    (tmp_path / "kafka_ssl_key_creds").unlink()
    with pytest.raises(ConfigError, match=r"^KAFKA_SSL_KEY_CREDENTIALS: cannot read .*kafka_ssl_key_creds: "):
        settings_from_environment(environ, None, secrets=str(tmp_path))
