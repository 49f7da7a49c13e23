"""Brokers on a real ZooKeeper: clusters across processes, session loss, unreachable servers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from raw_frames import exchange
from store_helpers import expire_session, wait_until

from kafkapy import Broker
from kafkapy.protocol import decode_response, encode_request
from kafkapy.store import ZooKeeperStore

LISTENING = re.compile(r"listening on PLAINTEXT://127\.0\.0\.1:(\d+)")


def _round_trip(port: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
    import socket

    frame = encode_request(api_key, version, 1, "zk-test", body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        return decode_response(exchange(sock, frame), api_key, version).body


def _metadata_with(port: int, brokers: int) -> Any:
    metadata = _round_trip(port, 3, 12, {"topics": None})
    return metadata if len(metadata["brokers"]) == brokers else None


@pytest.fixture
def serve_process(zk_connect: str) -> Iterator[Any]:
    """Start `kafkapy serve` on this test's chroot: (process, port); what it logged before listening
    is kept in ``start.early[process.pid]``."""
    procs: list[subprocess.Popen[str]] = []
    early: dict[int, list[str]] = {}

    def start(broker_id: int) -> tuple[subprocess.Popen[str], int]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkapy.cli", "serve", "--override", f"broker.id={broker_id}",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"zookeeper.connect={zk_connect}",
             "--override", "zookeeper.session.timeout.ms=6000"],
            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        procs.append(proc)
        assert proc.stderr is not None
        lines = early[proc.pid] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            match = LISTENING.search(line)
            if match:
                return proc, int(match.group(1))
            assert line or proc.poll() is None, f"kafkapy serve exited: {proc.returncode}"
        raise AssertionError("kafkapy serve did not start listening")

    start.early = early  # type: ignore[attr-defined]
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)  # and its stderr pipe closed


def test_two_serve_processes_on_one_zookeeper_see_each_other(serve_process: Any) -> None:
    _first, port_a = serve_process(1)
    second, port_b = serve_process(2)
    for port in (port_a, port_b):
        metadata = wait_until(lambda p=port: _metadata_with(p, 2), what="both brokers in Metadata")
        assert sorted((b["node_id"], b["port"]) for b in metadata["brokers"]) == [(1, port_a), (2, port_b)]
        assert metadata["controller_id"] in (1, 2)
        described = _round_trip(port, 1010, 0, {"node_ids": []})
        assert sorted(b["node_id"] for b in described["brokers"]) == [1, 2]
    # One cluster: both report the same id, stored at /cluster/id.
    assert _round_trip(port_a, 3, 12, {"topics": None})["cluster_id"] == \
        _round_trip(port_b, 3, 12, {"topics": None})["cluster_id"]
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0
    wait_until(lambda: [b["node_id"] for b in _round_trip(port_a, 3, 12, {"topics": None})["brokers"]] == [1],
               what="the stopped broker to leave Metadata")


def test_a_corrupt_broker_registration_hides_no_broker(zk_connect: str, serve_process: Any) -> None:
    """Issue 14 item 1: /brokers/ids/9 with invalid JSON (and /brokers/ids/8 with an unknown version)
    in ZooKeeper. A fresh `kafkapy serve` lists itself and every valid broker in Metadata, a real client
    bootstraps, and each bad registration is logged once, naming its path, however often it is re-read."""
    from kafka.admin import KafkaAdminClient

    hosts, chroot = zk_connect.split("/", 1)
    raw = KazooClient(hosts=hosts)
    raw.start(timeout=10)
    try:
        raw.create(f"/{chroot}/brokers/ids/9", b"{not json", makepath=True)
        raw.create(f"/{chroot}/brokers/ids/8", b'{"version":99,"host":"h","port":1}', makepath=True)
        proc, port = serve_process(1)
        metadata = _round_trip(port, 3, 12, {"topics": None})
        assert [(b["node_id"], b["port"]) for b in metadata["brokers"]] == [(1, port)]
        # Another (valid) broker registers later: the watch re-reads /brokers/ids, corrupt nodes and all.
        raw.create(f"/{chroot}/brokers/ids/5", json.dumps(
            {"version": 4, "host": "127.0.0.1", "port": port, "jmx_port": -1, "timestamp": "1",
             "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"],
             "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "rack": None}).encode(),
            ephemeral=True)
        wait_until(lambda: _metadata_with(port, 2), what="broker 5 in Metadata")
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", client_id="corrupt-znode",
                                 request_timeout_ms=10000)
        try:
            described = admin.describe_cluster()
        finally:
            admin.close()
        assert sorted(b["broker_id"] for b in described["brokers"]) == [1, 5]
        assert described["controller_id"] == 1
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1]
        assert proc.returncode == 0
    finally:
        raw.stop()
        raw.close()
    stderr = "".join(serve_process.early[proc.pid]) + rest
    assert "Traceback" not in stderr
    for bad, problem in (("9", "invalid JSON"), ("8", "unknown version 99")):
        logged = [line for line in stderr.splitlines() if f"/{chroot}/brokers/ids/{bad}" in line]
        assert len(logged) == 1 and problem in logged[0], stderr


def test_broker_re_registers_after_its_session_expires(zk_connect: str) -> None:
    raw = KazooClient(hosts=zk_connect.split("/")[0])
    raw.start(timeout=10)
    chroot = "/" + zk_connect.split("/", 1)[1]
    try:
        with Broker({"broker.id": 7, "zookeeper.connect": zk_connect,
                     "zookeeper.session.timeout.ms": 4000}) as broker:
            assert broker.runtime is not None
            store = broker.runtime.store
            assert isinstance(store, ZooKeeperStore)
            store.set_entity_config("ips/10.0.0.1", {"connection_creation_rate": "10"})
            old_session = store.client.client_id[0]
            expire_session(store, zk_connect.split("/")[0])
            wait_until(lambda: store.client.connected and store.client.client_id[0] != old_session,
                       what="a new ZooKeeper session")
            node = wait_until(lambda: raw.exists(f"{chroot}/brokers/ids/7"), what="the re-registration")
            assert node.ephemeralOwner == store.client.client_id[0]
            port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
            assert [b["node_id"] for b in _round_trip(port, 3, 12, {"topics": None})["brokers"]] == [7]
            # Durable state survives the session.
            assert store.entity_config("ips/10.0.0.1") == {"connection_creation_rate": "10"}
            registered = json.loads(raw.get(f"{chroot}/brokers/ids/7")[0])
            assert registered["endpoints"] == [f"PLAINTEXT://{broker.bootstrap_servers}"]
    finally:
        raw.stop()
        raw.close()


def test_unreachable_zookeeper_fails_start_with_a_clear_message() -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "kafkapy.cli", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", "zookeeper.connect=127.0.0.1:9", "--override", "zookeeper.connection.timeout.ms=1500"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "zookeeper" in result.stderr.lower() and "Traceback" not in result.stderr
    assert time.monotonic() - started < 30



def test_a_broker_killed_and_restarted_at_once_is_told_why_its_id_is_taken(zk_connect: str,
                                                                          serve_process: Any) -> None:
    """kill -9 leaves the broker's ephemeral /brokers/ids/<id> until ZooKeeper expires its session,
    and a restart within that time is refused (as Kafka's is, NodeExistsException): the line says
    who holds the id and that waiting out the session is the way, not only that the znode exists."""
    from kafkapy.errors import KafkaPyError

    killed, port = serve_process(3)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    with pytest.raises(KafkaPyError) as refused, Broker({"broker.id": 3, "zookeeper.connect": zk_connect}):
        pass
    message = str(refused.value)
    chroot = "/" + zk_connect.partition("/")[2]
    assert message.startswith(f"broker id 3 is already registered in this cluster ({chroot}/brokers/ids/3 "
                              f"exists, written at "), message
    assert f"by a broker listening on PLAINTEXT://127.0.0.1:{port}, held by ZooKeeper session 0x" in message
    assert "or one stopped without closing its session (kill -9) holds it until ZooKeeper expires" in message
    assert "\n" not in message
