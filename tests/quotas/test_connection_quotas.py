"""Connection quotas measured on loopback: per-IP rate, broker-wide and listener rate, counts."""

from __future__ import annotations

import concurrent.futures
import threading
import time
import urllib.request

from quota_wire import alter, served

from kafkapy import Broker
from kafkapy.quotas import QuotasModule
from kafkapy.testing import wait_until

RATE = "connection_creation_rate"


def _module(broker: Broker) -> QuotasModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, QuotasModule))


def _ip_quota_is(broker: Broker, address: str, quota: float | None) -> None:
    """Wait until the broker applies an ip quota just altered: the store's change reaches the
    quotas module through a watch, after AlterClientQuotas has answered (as in Kafka)."""
    quotas = _module(broker).connection_quotas
    assert quotas is not None
    wait_until(lambda: quotas.ip_rate_quota(address) == quota, what=f"{address}'s ip quota at {quota}")


def _storm(
    address: str,
    attempts: int,
    interval: float,
    source: str | None = None,
) -> tuple[list[bool], list[float]]:
    """``attempts`` connections, one every ``interval`` s, each in its own thread; (served?, finish time)."""
    start = time.monotonic()
    results: list[bool] = [False] * attempts
    finished: list[float] = [0.0] * attempts

    def one(i: int) -> None:
        results[i] = served(address, source, timeout=5.0)
        finished[i] = time.monotonic() - start

    threads = []
    for i in range(attempts):
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t = threading.Thread(target=one, args=(i,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return results, finished


def test_per_ip_rate_serves_about_the_quota_and_closes_the_rest() -> None:
    config = {
        "quota.window.num": "2",
        "quota.window.size.seconds": "1",
        "metrics.listener": "http://127.0.0.1:0/metrics",
    }
    with Broker(config) as b:
        a = b.bootstrap_servers
        assert alter(a, [({"ip": "127.0.0.2"}, [(RATE, 10)])]) == [(0, None)]
        _ip_quota_is(b, "127.0.0.2", 10.0)
        # 60 attempts over 3 s from 127.0.0.2 (20/s), while 127.0.0.3 connects now and then
        other: list[float] = []

        def other_ip() -> None:
            for _ in range(5):
                t0 = time.monotonic()
                assert served(a, "127.0.0.3")
                other.append(time.monotonic() - t0)
                time.sleep(0.5)

        side = threading.Thread(target=other_ip)
        side.start()
        results, finished = _storm(a, 60, 0.05, "127.0.0.2")
        side.join()
        accepted = sum(results)
        span = max(f for f, ok in zip(finished, results) if ok)
        # Kafka's Rate pads a young window to (quota.window.num - 1) windows: the quota holds over
        # the elapsed time plus that one padded window (an initial credit of quota * 1 s).
        measured = accepted / (span + 1.0)
        print(
            f"per-IP: {accepted}/60 served over {span:.2f}s (+1 s padded window) = {measured:.1f}/s "
            f"(quota 10/s)"
        )
        assert 8.0 <= measured <= 12.0, measured  # +-20%, as Kafka's tests allow
        assert max(other) < 0.5  # the other IP never waits on this one's quota
        m = _module(b).metrics
        assert m.value("connections-dropped-total", listener="PLAINTEXT") == 60 - accepted
        assert m.value("connections-throttled-total", listener="PLAINTEXT") >= 60 - accepted
        assert m.value("ip-connection-accept-throttle-time", listener="PLAINTEXT") > 0
        assert m.value("connection-accept-rate", ip="127.0.0.2") > 0
        url = _module(b).metrics_url
        assert url is not None
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        for name in (
            "kafka_network_socket_server_metrics_broker_connection_accept_rate",
            'kafka_network_socket_server_metrics_connection_accept_rate{ip="",listener="PLAINTEXT"}',
            'kafka_network_socket_server_metrics_connection_accept_rate{ip="127.0.0.2",listener=""}',
            "kafka_network_socket_server_metrics_connection_accept_throttle_time",
            "kafka_network_socket_server_metrics_ip_connection_accept_throttle_time",
            "kafka_network_acceptor_acceptorblockedpercent",
            "kafka_network_socket_server_metrics_connections_dropped_total",
        ):
            assert name in text, name
        # raising the quota at run time takes effect without a restart
        assert alter(a, [({"ip": "127.0.0.2"}, [(RATE, 1000)])]) == [(0, None)]
        _ip_quota_is(b, "127.0.0.2", 1000.0)
        assert all(_storm(a, 20, 0.0, "127.0.0.2")[0])
        # removing it: unlimited, and the per-IP metric goes away
        assert alter(a, [({"ip": "127.0.0.2"}, [(RATE, None)])]) == [(0, None)]
        _ip_quota_is(b, "127.0.0.2", None)
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        assert 'connection_accept_rate{ip="127.0.0.2"' not in text


def test_default_ip_quota_applies_to_ips_without_their_own() -> None:
    with Broker({"quota.window.num": "2"}) as b:
        a = b.bootstrap_servers
        assert (
            alter(a, [({"ip": None}, [(RATE, 5)]), ({"ip": "127.0.0.5"}, [(RATE, 1000)])]) == [(0, None)] * 2
        )
        _ip_quota_is(b, "127.0.0.5", 1000.0)
        _ip_quota_is(b, "127.0.0.4", 5.0)
        assert all(_storm(a, 15, 0.0, "127.0.0.5")[0])
        assert sum(_storm(a, 15, 0.0, "127.0.0.4")[0]) < 15


def test_broker_wide_rate_delays_and_drops_nothing() -> None:
    config = {"quota.window.num": "2", "max.connection.creation.rate": "10"}
    with Broker(config) as b:
        t0 = time.monotonic()
        pool = concurrent.futures.ThreadPoolExecutor(1)
        storm = pool.submit(_storm, b.bootstrap_servers, 30, 0.0)
        time.sleep(1.0)
        m = _module(b).metrics
        assert m.value("connection-accept-throttle-time", listener="PLAINTEXT") > 0
        assert m.value("AcceptorBlockedPercent", group="Acceptor", listener="PLAINTEXT") > 0
        results, finished = storm.result()
        pool.shutdown()
        elapsed = max(finished)
        print(f"broker-wide: {sum(results)}/30 served in {elapsed:.2f}s (limit 10/s)")
        assert all(results)
        assert elapsed >= 1.2  # 30 at 10/s with a 1 s padded window: about 2 s
        assert m.value("connections-dropped-total", listener="PLAINTEXT") == 0
        assert m.value("connections-throttled-total", listener="PLAINTEXT") > 0
        assert time.monotonic() - t0 < 10


def test_inter_broker_listener_is_exempt_and_limits_change_at_run_time() -> None:
    config = {
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "quota.window.num": "2",
        "max.connection.creation.rate": "5",
        # Its own limit: without one it inherits the broker-wide 5/s (test_listener_limits.py).
        "listener.name.internal.max.connection.creation.rate": "100000",
    }
    with Broker(config) as b:
        client, internal = b.listeners["CLIENT"], b.listeners["INTERNAL"]
        pool = concurrent.futures.ThreadPoolExecutor(1)
        storm = pool.submit(_storm, client, 25, 0.0)
        time.sleep(0.3)
        waits = []
        for _ in range(10):
            t0 = time.monotonic()
            assert served(internal)
            waits.append(time.monotonic() - t0)
        results, finished = storm.result()
        print(
            f"inter-broker during a storm: max wait {max(waits) * 1000:.0f} ms; "
            f"client storm took {max(finished):.2f}s"
        )
        assert all(results) and max(waits) < 0.3 and max(finished) > 2.0
        # raise the broker-wide limit at run time: the next storm is not held back
        module = _module(b)
        assert b.runtime is not None
        import asyncio

        asyncio.run_coroutine_threadsafe(
            module.reconfigure({"max.connection.creation.rate": 100000}), b.runtime.loop
        ).result(5)
        time.sleep(1.0)
        results, finished = _storm(client, 25, 0.0)
        assert all(results) and max(finished) < 1.0
        # a listener's own limit
        asyncio.run_coroutine_threadsafe(
            module.reconfigure({"listener.name.internal.max.connection.creation.rate": 5}), b.runtime.loop
        ).result(5)
        results, finished = _storm(internal, 15, 0.0)
        assert all(results) and max(finished) > 1.0
        pool.shutdown()


def test_connection_counts_per_ip_with_overrides() -> None:
    config = {"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.4:4,localhost:3"}
    import socket

    with Broker(config) as b:
        a = b.bootstrap_servers
        host, _, port = a.rpartition(":")
        quotas = _module(b).connection_quotas
        assert quotas is not None

        def counted(source: str, count: int) -> None:  # the broker's loop has seen the opens and closes
            wait_until(lambda: quotas.ip_counts.get(source, 0) == count, what=f"{count} from {source}")

        for source, limit in (("127.0.0.2", 2), ("127.0.0.4", 4), ("127.0.0.1", 3)):
            held = []
            for _ in range(limit):
                s = socket.create_connection((host, int(port)), source_address=(source, 0))
                held.append(s)
            counted(source, limit)
            assert not served(a, source)  # one over the limit: closed at once
            held.pop().close()
            counted(source, limit - 1)  # not a sleep: the close may be read after the next accept
            assert served(a, source)
            for s in held:
                s.close()


def test_max_connections_waits_for_a_slot() -> None:
    import socket

    with Broker({"max.connections": "3"}) as b:
        a = b.bootstrap_servers
        host, _, port = a.rpartition(":")
        held = [socket.create_connection((host, int(port))) for _ in range(3)]
        time.sleep(0.1)
        pool = concurrent.futures.ThreadPoolExecutor(1)
        waiting = pool.submit(served, a, None, 5.0)
        time.sleep(0.5)
        assert not waiting.done()  # held in the accept queue, not dropped
        held.pop().close()
        assert waiting.result(10)  # served's own socket timeout (5 s) is the bound
        for s in held:
            s.close()
        pool.shutdown()


def test_inter_broker_listener_at_max_connections_closes_the_least_recently_active_client() -> None:
    """KIP-402: at max.connections the inter-broker listener still accepts, and the broker closes the
    least recently active connection on another listener to get back to the limit."""
    import socket
    import struct

    from kafkapy.client import SimpleClient
    from kafkapy.protocol import encode_request

    frame = encode_request(18, 0, 1, "kip-402", {})

    def ask(sock: socket.socket) -> bool:
        """One ApiVersions round trip on an open socket: False if the broker closed it."""
        try:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            header = sock.recv(4)
            if len(header) < 4:
                return False
            size = struct.unpack(">i", header)[0]
            while size > 0:
                size -= len(sock.recv(size))
            return True
        except OSError:
            return False

    def closed_by_broker(sock: socket.socket) -> bool:
        sock.settimeout(2.0)
        try:
            return sock.recv(1) == b""
        except OSError:
            return True

    config = {
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": "3",
    }
    with Broker(config) as b:
        host, _, client_port = b.listeners["CLIENT"].rpartition(":")
        internal_port = int(b.listeners["INTERNAL"].rpartition(":")[2])
        clients = [socket.create_connection((host, int(client_port)), timeout=5) for _ in range(3)]
        for sock in clients:  # activity in order 0, 1, 2, then 0 again: 1 is the least recently active
            assert ask(sock)
            time.sleep(0.05)
        assert ask(clients[0])
        # a fourth client connection waits for a slot ...
        pool = concurrent.futures.ThreadPoolExecutor(1)
        waiting = pool.submit(served, b.listeners["CLIENT"], None, 5.0)
        time.sleep(0.3)
        assert not waiting.done()
        # ... but an inter-broker one is served at once, and client 1 makes room for it
        internal = socket.create_connection((host, internal_port), timeout=5)
        t0 = time.monotonic()
        assert ask(internal)
        assert time.monotonic() - t0 < 0.5
        assert closed_by_broker(clients[1])
        assert ask(clients[0]) and ask(clients[2])
        quotas = _module(b).connection_quotas
        assert quotas is not None
        wait_until(lambda: quotas.total == 3, timeout=2.0, what="the count back at max.connections")
        assert not waiting.done()  # still at the limit: the waiting client is not let in
        internal.close()  # a slot frees: the waiting client gets it
        assert waiting.result(5)
        # lowering max.connections at run time (over the wire) closes the least recently active
        assert ask(clients[2])
        with SimpleClient(b.bootstrap_servers) as admin:
            body = admin.request(
                44,
                1,
                {
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": "",
                            "configs": [{"name": "max.connections", "config_operation": 0, "value": "2"}],
                        }
                    ],
                    "validate_only": False,
                },
            )
        assert body["responses"][0]["error_code"] == 0
        # the admin connection itself was the most recent; clients 0 and 2 remain, 0 is older
        assert closed_by_broker(clients[0])
        assert ask(clients[2])
        for sock in [*clients, internal]:
            sock.close()
        pool.shutdown()


def test_a_nan_ip_quota_is_a_rate_of_zero_as_in_kafka() -> None:
    """Kafka's broker takes connection_creation_rate as an Int, and NaN.toInt is 0: every
    connection from that ip is throttled and closed; other ips are served."""
    with Broker() as b:
        a = b.bootstrap_servers
        assert alter(a, [({"ip": "127.0.0.6"}, [(RATE, float("nan"))])]) == [(0, None)]
        _ip_quota_is(b, "127.0.0.6", 0.0)
        assert not served(a, "127.0.0.6")
        assert served(a, "127.0.0.7")
