"""Shared fixtures: a real ZooKeeper server (from pyspark's jars) for the metadata store tests."""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.kafka_python_sockets import mend_kafka_python_sockets
from tests.soak import soaked, soaking

# The test identity provider's fixtures (certificate_authority, idp), for the OIDC tests of
# tests/interop and tests/commands; the fuzz tests' ``errors`` fixture (tests/error_log.py).
pytest_plugins = ["oidc_provider", "fd_guard", "error_log"]

mend_kafka_python_sockets()  # kafka-python 3.0.12 leaks sockets (tests/kafka_python_sockets.py)

# The soak profile (tests/soak.py); KAFKAPY_HYPOTHESIS_PROFILE=soak or --hypothesis-profile soak.
settings.load_profile(os.environ.get("KAFKAPY_HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under the soak profile, scale the example count of every Hypothesis test: an explicit
    `@settings(max_examples=...)` (nearly all of them) wins over any profile, so the profile alone
    would soak only the few tests without settings of their own."""
    if not soaking():
        return
    done: set[int] = set()  # a parametrized test is one function (or class) behind many items
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if isinstance(own, settings):
            if id(test) not in done:
                done.add(id(test))
                test._hypothesis_internal_use_settings = soaked(own)  # type: ignore[union-attr]
            continue
        machine = getattr(item, "cls", None)
        if machine is not None and isinstance(getattr(machine, "settings", None), settings) \
                and id(machine) not in done:
            done.add(id(machine))
            machine.settings = soaked(machine.settings)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what collection made (modules, test functions, Hypothesis strategies: about 100,000
    objects, alive for the whole run) out of the cyclic collector's sight: each full collection
    would walk them all again, and the Hypothesis tests allocate enough for one every few seconds
    (0.4 s of the toolkit tests' CPU; docs/testing.md, "Keeping tests fast")."""
    gc.collect()
    gc.freeze()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _zookeeper_classpath() -> str | None:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not list(jars.glob("zookeeper-*.jar")):
        return None
    return str(jars / "*")


LOG4J2_INFO_TO_STDOUT = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{HH:mm:ss.SSS} %-5p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""


class ZooKeeperServer:
    """A standalone ZooKeeper (ZooKeeperServerMain) that tests can stop and restart on the same
    port and data directory."""

    def __init__(self, java: str, classpath: str, port: int, data_dir: Path,
                 max_session_timeout_ms: int | None = None) -> None:
        self.java = java
        self.classpath = classpath
        self.max_session_timeout_ms = max_session_timeout_ms
        self.port = port
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def chroot(self) -> str:
        """A fresh connect string with a chroot of its own, so tests never see each other's znodes."""
        return f"{self.connect}/t{uuid.uuid4().hex[:12]}"

    def start(self, timeout: float = 30.0) -> None:
        log = open(self.data_dir.parent / "zookeeper.log", "ab")
        # tickTime 500 ms: sessions may be as short as 1 s, so expiry tests stay quick (and as long
        # as 10 s, ZooKeeper's 20 ticks, unless max_session_timeout_ms says otherwise).
        settings = {"tickTime": "500", "dataDir": str(self.data_dir), "clientPort": str(self.port)}
        if self.max_session_timeout_ms is not None:
            settings["maxSessionTimeout"] = str(self.max_session_timeout_ms)
        config = self.data_dir.parent / "zoo.cfg"
        config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        # pyspark's jars bring log4j2 without a configuration (errors only): the server's own INFO
        # lines (sessions made, expired, the database loaded) are what log_tail shows a failing test.
        logging_config = self.data_dir.parent / "log4j2.properties"
        logging_config.write_text(LOG4J2_INFO_TO_STDOUT)
        # C1 only and the serial collector: the JVM is up in about 0.7 s instead of 1.2-1.4 s (C2's
        # compile threads and G1's set-up cost start-up CPU that a test's light load never repays).
        self.process = subprocess.Popen(
            [self.java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
             "-Dzookeeper.admin.enableServer=false", f"-Dlog4j2.configurationFile={logging_config}",
             "-Dzookeeper.4lw.commands.whitelist=*", "-cp", self.classpath,
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}; "
                                   f"see {self.data_dir.parent / 'zookeeper.log'}")
            if self.serving():
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer on port {self.port} within {timeout} s")

    def serving(self) -> bool:
        """True once the server answers sessions, not only four-letter words.

        ``ruok`` says imok while a restarted server is still loading its database (seconds, late in a
        full run); a client connecting then is turned away, so tests would time their waits from the
        wrong moment. ``srvr`` names a version only when the server is running.
        """
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"srvr")
                return sock.recv(64).startswith(b"Zookeeper version")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log, for a failing assertion to show (session expiries)."""
        path = self.data_dir.parent / "zookeeper.log"
        if not path.exists():
            return "(no ZooKeeper log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    yield from _running_zookeeper()


@pytest.fixture
def private_zookeeper_server() -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of the test's own, empty (a restart loads it in a moment, where the shared one
    holds the whole run's znodes), whose sessions may last up to a minute."""
    yield from _running_zookeeper(max_session_timeout_ms=60_000)


def _running_zookeeper(max_session_timeout_ms: int | None = None) -> Iterator[ZooKeeperServer]:
    java = shutil.which("java")
    classpath = _zookeeper_classpath()
    if java is None or classpath is None:
        reason = "java is not installed" if java is None else "pyspark's ZooKeeper jars are not installed"
        print(f"\n*** SKIPPING the ZooKeeper tests: {reason} ***")
        pytest.skip(f"ZooKeeper tests need java and pyspark's jars: {reason}")
    base = Path(tempfile.mkdtemp(prefix="kafkapy-zk-"))
    (base / "data").mkdir()
    server = ZooKeeperServer(java, classpath, _free_port(), base / "data", max_session_timeout_ms)
    try:
        for attempt in range(3):
            try:
                server.start()
                break
            except RuntimeError:
                # The free port was taken (another process's outgoing connection, between our probe
                # and ZooKeeper's bind): a new port. Any other failure is the test run's to see.
                if attempt == 2 or "Address already in use" not in server.log_tail():
                    raise
                server.port = _free_port()
        yield server
    finally:
        server.stop()
        if os.environ.get("KAFKAPY_KEEP_ZK_LOGS") is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"\nZooKeeper log and data kept in {base}")


@pytest.fixture(scope="session")
def zookeeper(zookeeper_server: ZooKeeperServer) -> str:
    """``127.0.0.1:PORT`` of a running ZooKeeper server (started once per test session)."""
    return zookeeper_server.connect


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer) -> str:
    """A connect string with a chroot of this test's own."""
    if not zookeeper_server.serving():  # a test that stopped the server failed before restarting it
        zookeeper_server.restart()
    return zookeeper_server.chroot()
