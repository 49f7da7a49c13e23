"""Kafka over TLS decoded with the clients' key log, against the plaintext run and tshark.

The embedded broker serves a PLAINTEXT and an SSL listener (trustme's certificates) while dumpcap
records each. On both, the same requests (ApiVersions v3, Metadata v9), written with kafkapy's
codec, go out on their own connections: over TLS 1.2 with each AEAD suite (Python's ssl), over
TLS 1.3 with each of its three suites (``openssl s_client -ciphersuites``, OpenSSL being what
librdkafka links) and once with a KeyUpdate from each side before each request, every client
writing the NSS key log. kafka-python produces and consumes over TLS 1.3 and over TLS 1.2 with
its ``ssl_context``'s key log, and aiokafka produces over TLS 1.3 the same way; librdkafka, which
has no key log setting, produces over TLS 1.3 and over TLS 1.2 with the broker's key log
(``SSLKEYLOGFILE`` when the broker made its context, as Python's ``ssl.create_default_context``
reads it).

Checked: with the clients' key log every row of theirs is ``ok``, its request bodies and its
ApiVersions response are the plaintext run's, Metadata's too but for the listener's port, and the
request headers are tshark's (``-o tls.keylog_file``) connection by connection; librdkafka's
connections, whose keys only the broker logged, are one "TLS, no keys" row each, and decode
with the broker's log added. Skipped, saying why, without dumpcap/tshark/openssl or permission.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from live_capture import TSHARK, capturing, skip_live
from raw_frames import exchange

from kafkapy.capture.rows import decode_capture
from kafkapy.embedded import Broker
from kafkapy.protocol import encode_request
from kafkapy.protocol.api_keys import ApiKey

OPENSSL = shutil.which("openssl")
TIMEOUT_S = 30
# (api key, version, body): answered the same on any listener but for Metadata's broker port
REQUESTS: list[tuple[int, int, dict[str, Any]]] = [
    (ApiKey.API_VERSIONS, 3, {"client_software_name": "kafkapy-test", "client_software_version": "1"}),
    (ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False}),
]  # fmt: skip
# trustme's certificates carry ECDSA keys
TLS12_SUITES = ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-CHACHA20-POLY1305")
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


@attrs.frozen
class TlsCapture:
    plain: Path  # the PLAINTEXT listener's capture
    tls: Path  # the SSL listener's
    plain_port: int
    tls_port: int
    client_keys: Path  # the clients' key log
    all_keys: Path  # the clients' and the broker's


def _frames(client_id: str) -> list[bytes]:
    return [encode_request(key, version, corr, client_id, body) for corr, (key, version, body) in
            enumerate(REQUESTS, 1)]  # fmt: skip


def _raw_exchange(sock: socket.socket, client_id: str) -> None:
    for frame in _frames(client_id):
        exchange(sock, frame)


def _python_tls(port: int, ca: Path, keys: Path, suite: str) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(suite)
    context.keylog_filename = str(keys)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            _raw_exchange(sock, f"tls12-{suite}")
            sock.unwrap()


def _openssl_tls13(port: int, ca: Path, keys: Path, suite: str, *, key_updates: bool = False) -> None:
    """The requests through ``openssl s_client`` (TLS 1.3 with one suite), its key log appended.
    With ``key_updates`` a KeyUpdate asking the broker for one back (s_client's ``K`` command,
    which ``-brief`` leaves on, unlike ``-quiet``) goes before each request."""
    assert OPENSSL is not None
    own = keys.with_suffix(f".{suite}{'.updates' if key_updates else ''}")
    with subprocess.Popen(
        [OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_3", "-ciphersuites", suite,
         "-CAfile", str(ca), "-keylogfile", str(own), "-brief", "-no_ign_eof"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    ) as proc:  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        for frame in _frames(f"tls13-{suite}{'-key-updates' if key_updates else ''}"):
            if key_updates:
                time.sleep(0.3)  # s_client reads a command from a line of its own
                proc.stdin.write(b"K\n")
                proc.stdin.flush()
                time.sleep(0.3)
            proc.stdin.write(struct.pack(">i", len(frame)) + frame)
            proc.stdin.flush()
            size = struct.unpack(">i", proc.stdout.read(4))[0]
            assert len(proc.stdout.read(size)) == size
        proc.stdin.close()
        proc.wait(timeout=TIMEOUT_S)
    with keys.open("a") as log:
        log.write(own.read_text())


def _kafka_python(bootstrap: str, ca: Path, keys: Path, version: ssl.TLSVersion) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = context.maximum_version = version
    context.keylog_filename = str(keys)
    config: dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": "SSL",
                              "ssl_context": context, "client_id": f"kafka-python-{version.name}"}
    producer = KafkaProducer(**config)
    producer.send("tls-topic", b"secret " + version.name.encode()).get(timeout=TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer("tls-topic", auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT_S * 1000,
                             **config)  # fmt: skip
    assert next(consumer).value.startswith(b"secret")
    consumer.close()


def _aiokafka(bootstrap: str, ca: Path, keys: Path) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    context = ssl.create_default_context(cafile=str(ca))
    context.keylog_filename = str(keys)

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                    ssl_context=context, client_id="aiokafka")  # fmt: skip
        await producer.start()
        try:
            await producer.send_and_wait("tls-topic", b"secret from aiokafka")
        finally:
            await producer.stop()

    asyncio.run(produce())


def _librdkafka(bootstrap: str, ca: Path, tmp: Path) -> None:
    """A producer over TLS 1.3 here, and one over TLS 1.2 in a process whose OpenSSL is held to
    it by an ``OPENSSL_CONF`` file (librdkafka has no setting for the version)."""
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca)}
    producer = Producer({**config, "client.id": "librdkafka"})
    producer.produce("tls-topic", b"from librdkafka")
    assert producer.flush(TIMEOUT_S) == 0
    conf = tmp / "openssl-tls12.cnf"
    conf.write_text("openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n[ssl_sect]\n"
                    "system_default = tls12\n[tls12]\nMaxProtocol = TLSv1.2\n")
    code = ("import sys; from confluent_kafka import Producer\n"
            f"p = Producer({{**{config!r}, 'client.id': 'librdkafka-tls12'}})\n"
            "p.produce('tls-topic', b'from librdkafka over TLS 1.2'); sys.exit(p.flush(30))\n")
    subprocess.run([sys.executable, "-c", code], env={**os.environ, "OPENSSL_CONF": str(conf)},
                   check=True, timeout=TIMEOUT_S * 2)


@pytest.fixture(scope="module")
def tls_capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCapture]:
    import trustme

    if OPENSSL is None:
        skip_live("openssl (its s_client) is needed for TLS 1.3's suites")
    tmp = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    (tmp / "server.pem").write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(tmp / "server.key"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    ca_file, client_keys, broker_keys = tmp / "ca.pem", tmp / "client.keys", tmp / "broker.keys"
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
              "ssl.certfile": str(tmp / "server.pem"), "ssl.keyfile": str(tmp / "server.key")}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SSLKEYLOGFILE", str(broker_keys))  # read when the broker makes its SSL context
        broker = Broker(config).__enter__()
    try:
        plain_port = int(broker.listeners["PLAINTEXT"].rsplit(":", 1)[1])
        tls_port = int(broker.listeners["SSL"].rsplit(":", 1)[1])
        tls_bootstrap = f"127.0.0.1:{tls_port}"
        with capturing(tmp / "plain.pcapng", plain_port):
            with socket.create_connection(("127.0.0.1", plain_port), timeout=TIMEOUT_S) as sock:
                _raw_exchange(sock, "plain")
        with capturing(tmp / "tls.pcapng", tls_port):
            for suite in TLS12_SUITES:
                _python_tls(tls_port, ca_file, client_keys, suite)
            for suite in TLS13_SUITES:
                _openssl_tls13(tls_port, ca_file, client_keys, suite)
            _openssl_tls13(tls_port, ca_file, client_keys, TLS13_SUITES[0], key_updates=True)
            for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
                _kafka_python(tls_bootstrap, ca_file, client_keys, version)
            _aiokafka(tls_bootstrap, ca_file, client_keys)
            _librdkafka(tls_bootstrap, ca_file, tmp)
    finally:
        broker.__exit__(None, None, None)
    all_keys = tmp / "all.keys"
    all_keys.write_text(client_keys.read_text() + broker_keys.read_text())
    yield TlsCapture(tmp / "plain.pcapng", tmp / "tls.pcapng", plain_port, tls_port, client_keys, all_keys)


def _rows(path: Path, port: int, keys: Path | None = None) -> list[dict[str, Any]]:
    return list(decode_capture(path, kafka_ports=[port], tls_keylog=keys))


def _tshark_requests(c: TlsCapture, keys: Path) -> set[tuple[int, int, int, int, str]]:
    """(tcp.stream, correlation id, api key, version, client id) of each request tshark decrypts."""
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(c.tls), "-o", f"tls.keylog_file:{keys}", "-d", f"tcp.port=={c.tls_port},tls",
         "-d", f"tls.port=={c.tls_port},kafka", "-Y", f"kafka && tcp.dstport=={c.tls_port}", "-T", "fields",
         "-E", "separator=|", "-E", "occurrence=a", "-e", "tcp.stream", "-e", "kafka.correlation_id",
         "-e", "kafka.api_key", "-e", "kafka.api_version", "-e", "kafka.client_id"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found: set[tuple[int, int, int, int, str]] = set()
    for line in out.stdout.splitlines():
        stream, corrs, keys_, versions, client_ids = (field.split(",") for field in line.split("|"))
        for corr, key, version, client_id in zip(corrs, keys_, versions, client_ids):
            found.add((int(stream[0]), int(corr), int(key), int(version), client_id))
    return found


def test_decrypted_rows_are_the_plaintext_runs(tls_capture: TlsCapture) -> None:
    c = tls_capture
    plain = {row["correlation_id"]: row for row in _rows(c.plain, c.plain_port)}
    assert sorted(plain) == [1, 2] and all(row["status"] == "ok" for row in plain.values())
    rows = _rows(c.tls, c.tls_port, c.client_keys)
    variants = [f"tls12-{suite}" for suite in TLS12_SUITES] + [f"tls13-{suite}" for suite in TLS13_SUITES]
    variants.append(f"tls13-{TLS13_SUITES[0]}-key-updates")
    for variant in variants:
        mine = {row["correlation_id"]: row for row in rows if row["client_id"] == variant}
        assert sorted(mine) == [1, 2], variant
        for corr, row in mine.items():
            expected = plain[corr]
            assert row["status"] == "ok", (variant, row["reason"])
            for column in ("api_key", "api_name", "api_version", "request", "error_code", "errors"):
                assert row[column] == expected[column], (variant, column)
            assert json.loads(row["request"])["client_software_name" if corr == 1 else "topics"] is not None
            response = row["response"].replace(f":{c.tls_port}", f":{c.plain_port}")
            expected_response = expected["response"]
            if row["api_key"] == ApiKey.METADATA:
                # the broker's port is the listener's: an int in the body, not the text above
                response = json.dumps(_port_as(json.loads(row["response"]), c.tls_port, c.plain_port))
                expected_response = json.dumps(json.loads(expected_response))
            assert response == expected_response, variant


def _port_as(body: dict[str, Any], port: int, instead: int) -> dict[str, Any]:
    for broker in body["brokers"]:
        if broker["port"] == port:
            broker["port"] = instead
    return body


def test_clients_decrypted_and_as_tshark_reads_them(tls_capture: TlsCapture) -> None:
    c = tls_capture
    rows = _rows(c.tls, c.tls_port, c.client_keys)
    clients = {row["client_id"] for row in rows}
    assert {"kafka-python-TLSv1_3", "kafka-python-TLSv1_2", "aiokafka"} <= clients
    produced = [row for row in rows if row["api_name"] == "Produce"]
    values = {record["value"] for row in produced for topic in json.loads(row["request"])["topic_data"]
              for part in topic["partition_data"] for record in part["records"]}  # fmt: skip
    # "secret TLSv1_3", "secret TLSv1_2", "secret from aiokafka"
    assert {"c2VjcmV0IFRMU3YxXzM=", "c2VjcmV0IFRMU3YxXzI=", "c2VjcmV0IGZyb20gYWlva2Fma2E="} <= values
    fetched = [row for row in rows if row["api_name"] == "Fetch" and row["status"] == "ok"]
    assert any("c2VjcmV0IFRMU3Yx" in row["response"] for row in fetched)
    header = ("connection_id", "correlation_id", "api_key", "api_version", "client_id")
    decoded = {tuple(row[column] for column in header) for row in rows if row["api_key"] is not None}
    assert decoded == _tshark_requests(c, c.client_keys)
    for row in rows:  # kafka-python's and openssl's rows decode; librdkafka's keys are the broker's
        if row["client_id"] is not None:
            assert row["status"] in ("ok", "unmatched_request"), row


def _tls12_streams(c: TlsCapture) -> set[int]:
    """tcp.stream of each connection whose ServerHello chose TLS 1.2 (no supported_versions)."""
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(c.tls), "-d", f"tcp.port=={c.tls_port},tls", "-Y",
         "tls.handshake.type == 2 && !tls.handshake.extensions.supported_version", "-T", "fields",
         "-e", "tcp.stream"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return {int(stream) for stream in out.stdout.split()}


def test_connections_without_their_keys_say_so(tls_capture: TlsCapture) -> None:
    c = tls_capture
    full = _rows(c.tls, c.tls_port, c.all_keys)
    names = ("librdkafka", "librdkafka-tls12")
    librdkafka = {row["connection_id"] for row in full if row["client_id"] in names}
    assert {row["client_id"] for row in full} >= {"librdkafka", "librdkafka-tls12"}
    tls12 = {row["connection_id"] for row in full if row["client_id"] == "librdkafka-tls12"}
    assert tls12 <= _tls12_streams(c)  # OPENSSL_CONF held it to TLS 1.2
    assert all(row["reason"] is None or not row["reason"].startswith("TLS") for row in full)
    statuses = {row["status"] for row in full if row["connection_id"] in librdkafka}
    assert statuses <= {"ok", "unmatched_request"}
    rows = _rows(c.tls, c.tls_port, c.client_keys)
    no_keys = [row for row in rows if row["reason"] and row["reason"].startswith("TLS, no keys")]
    assert sorted(row["connection_id"] for row in no_keys) == sorted(librdkafka)  # one row each
    assert all(row["status"] == "undecodable" and "no secrets for client random" in row["reason"]
               for row in no_keys)
    assert not any(row["connection_id"] in librdkafka for row in rows if row not in no_keys)
    # without a key log: every TLS connection one row, and nothing else
    bare = _rows(c.tls, c.tls_port)
    assert all(row["reason"].startswith("TLS, no keys") for row in bare)
    assert len(bare) == len({row["connection_id"] for row in full})


def test_key_updates_were_on_the_wire(tls_capture: TlsCapture) -> None:
    """The connection with KeyUpdates (decoded above) had them from both sides, as tshark sees."""
    c = tls_capture
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-r", str(c.tls), "-o", f"tls.keylog_file:{c.client_keys}",
         "-d", f"tcp.port=={c.tls_port},tls", "-Y", "tls.handshake.type == 24", "-T", "fields",
         "-e", "tcp.srcport"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    senders = out.stdout.split()
    assert str(c.tls_port) in senders and any(port != str(c.tls_port) for port in senders)
