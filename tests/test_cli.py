"""`kafkapy serve` and `kafkapy broker-metadata` as real processes talking over real sockets."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkapy.server.core import PROTOCOL_VERSION, PROTOCOL_VERSION_MIN

LISTENING = re.compile(r"listening on (\w+)://([^\s:]+):(\d+)")
EPHEMERAL = "listeners=PLAINTEXT://127.0.0.1:0"


def kafkapy(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkapy.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


class Served:
    """A `kafkapy serve` child process whose stderr is read on a thread."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        """``env``: the child's whole environment (None: this process's)."""
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkapy.cli", "serve", *args], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:  # closed at the process's end
            for line in self.proc.stderr:
                self.stderr.append(line)
                self.lines.put(line)
        self.lines.put(None)

    def wait_listening(self, timeout: float = 20) -> tuple[str, str, int]:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                pytest.fail(f"kafkapy serve exited ({self.proc.wait()}) before listening:\n"
                            + "".join(self.stderr))
            match = LISTENING.search(line)
            if match:
                return match.group(1), match.group(2), int(match.group(3))
        pytest.fail(f"no `listening on` line within {timeout}s:\n" + "".join(self.stderr))

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 20) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def served() -> Iterator[Served]:
    server = Served("--override", EPHEMERAL, "--override", "broker.id=7", "--override", "tag.zone=eu-1")
    try:
        yield server
    finally:
        server.kill()


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return True
    return False


def test_serve_answers_broker_metadata_then_stops_on_sigterm(served: Served) -> None:
    name, host, port = served.wait_listening()
    assert (name, host) == ("PLAINTEXT", "127.0.0.1") and port > 0
    assert any(line.rstrip().endswith(f"listening on PLAINTEXT://127.0.0.1:{port}") for line in served.stderr)

    table = kafkapy("broker-metadata", "--bootstrap-server", f"{host}:{port}")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["NODE", "HOST", "PORT", "PROTOCOL", "TAGS"]
    assert row.split()[:4] == ["7", "127.0.0.1", str(port), f"{PROTOCOL_VERSION_MIN}-{PROTOCOL_VERSION}"]
    assert "zone=eu-1" in row and "broker.id=7" in row

    as_json = kafkapy("broker-metadata", "--bootstrap-server", f"{host}:{port}", "--node-id", "-1", "--json")
    assert as_json.returncode == 0, as_json.stderr
    (broker,) = json.loads(as_json.stdout)["brokers"]
    assert (broker["node_id"], broker["host"], broker["port"]) == (7, "127.0.0.1", port)
    assert (broker["protocol_version_min"], broker["protocol_version_max"]) == (PROTOCOL_VERSION_MIN,
                                                                                PROTOCOL_VERSION)
    tags = {t["key"]: t["value"] for t in broker["tags"]}
    assert tags["zone"] == "eu-1" and tags["endpoints"] == f"plaintext://127.0.0.1:{port}"

    none = kafkapy("broker-metadata", "--bootstrap-server", f"{host}:{port}", "--node-id", "99", "--json")
    assert none.returncode == 1 and json.loads(none.stdout) == {"brokers": []}
    assert none.stderr == "kafkapy broker-metadata: no broker with node id 99\n"
    some = kafkapy("broker-metadata", "--bootstrap-server", f"{host}:{port}", "--node-id", "7",
                   "--node-id", "5")
    assert some.returncode == 1 and some.stdout.splitlines()[1].split()[0] == "7"
    assert some.stderr == "kafkapy broker-metadata: no broker with node id 5\n"

    assert served.stop(signal.SIGTERM) == 0, "".join(served.stderr)
    assert "Traceback" not in "".join(served.stderr)
    assert refused(host, port)


def test_serve_stops_on_sigint(served: Served) -> None:
    _, host, port = served.wait_listening()
    assert served.stop(signal.SIGINT) == 0, "".join(served.stderr)
    assert refused(host, port)


def test_serve_finishes_with_an_open_client_connection(served: Served) -> None:
    _, host, port = served.wait_listening()
    with socket.create_connection((host, port), timeout=5) as idle_client:
        started = time.monotonic()
        assert served.stop() == 0, "".join(served.stderr)
        assert time.monotonic() - started < 10
        idle_client.settimeout(5)
        assert idle_client.recv(1) == b""  # the broker closed it


def test_bad_config_value_exits_non_zero_naming_the_key() -> None:
    result = kafkapy("serve", "--override", EPHEMERAL, "--override", "broker.id=seven")
    assert result.returncode != 0
    assert "broker.id" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_bad_override_syntax_exits_non_zero() -> None:
    result = kafkapy("serve", "--override", "listeners")
    assert result.returncode != 0 and "KEY=VALUE" in result.stderr and "Traceback" not in result.stderr


def test_taken_port_exits_non_zero_with_a_clear_message() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = kafkapy("serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}")
    assert result.returncode != 0
    assert "address already in use" in result.stderr.lower() and str(port) in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_config_file_is_read_and_overrides_win(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("# a Kafka-style file\nbroker.id=3\nlisteners=PLAINTEXT://127.0.0.1:9\n"
                          "tag.source: file\n", encoding="utf-8")
    server = Served("--config", str(properties), "--override", EPHEMERAL)
    try:
        _, host, port = server.wait_listening()
        result = kafkapy("broker-metadata", "--bootstrap-server", f"{host}:{port}", "--json")
        assert result.returncode == 0, result.stderr
        (broker,) = json.loads(result.stdout)["brokers"]
        assert broker["node_id"] == 3 and {"key": "source", "value": "file"} in broker["tags"]
        assert server.stop() == 0
    finally:
        server.kill()


def test_missing_config_file_exits_non_zero(tmp_path: Path) -> None:
    result = kafkapy("serve", "--config", str(tmp_path / "nope.properties"))
    assert result.returncode != 0 and "nope.properties" in result.stderr and "Traceback" not in result.stderr


def test_broker_metadata_reports_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connecting is refused
        result = kafkapy("broker-metadata", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "5")
    assert result.returncode != 0
    assert f"cannot connect to 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr


def test_broker_metadata_rejects_a_malformed_address() -> None:
    result = kafkapy("broker-metadata", "--bootstrap-server", "localhost")
    assert result.returncode == 2 and "HOST:PORT" in result.stderr


CAPTURE = str(Path(__file__).parent / "data" / "captures" / "00-produce-v2.pcap")


@pytest.mark.parametrize(("args", "says"), [
    (["broker-metadata", "--bootstrap-server", "nohost"], "'nohost' is not HOST:PORT"),
    (["broker-metadata", "--bootstrap-server", "h:70000"], "'h:70000' is not HOST:PORT"),
    (["configs", "--bootstrap-server", "nohost", "--describe", "--entity-type", "brokers",
      "--entity-default"], "'nohost' is not HOST:PORT"),
    (["features", "--bootstrap-server", "nohost", "describe"], "'nohost' is not HOST:PORT"),
    (["decode", "--kafka-port", "70000", CAPTURE], "'70000' is not a TCP port"),
    (["decode", "--kafka-port", "0", CAPTURE], "'0' is not a TCP port"),
    (["decode", "--bodies", "99999", CAPTURE], "unknown API key 99999"),
    (["decode", "--format", "parquet", CAPTURE], "--format parquet needs --output"),
    (["decode", "-", "-"], "- (stdin) can be given once"),
    (["spark-decode", "--kafka-port", "70000", "-o", "x", CAPTURE], "'70000' is not a TCP port"),
    (["serve", "--no-such-option"], "unrecognized arguments"),
    (["no-such-command"], "invalid choice"),
    ([], "required"),
])
def test_every_usage_error_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    result = kafkapy(*args)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_a_config_file_with_a_latin1_byte_serves(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_bytes(b"# Configur\xe9 by hand\nbroker.id=4\ntag.city=Montr\\u00e9al\n")
    server = Served("--config", str(properties), "--override", EPHEMERAL)
    try:
        _, host, port = server.wait_listening()
        result = kafkapy("broker-metadata", "--bootstrap-server", f"{host}:{port}", "--json")
        (broker,) = json.loads(result.stdout)["brokers"]
        assert broker["node_id"] == 4 and {"key": "city", "value": "Montréal"} in broker["tags"]
        assert server.stop() == 0
    finally:
        server.kill()


def test_a_malformed_escape_in_the_config_file_is_one_line_exit_2(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_bytes(b"broker.id=4\ntag.city=Montr\\u0g9al\n")
    result = kafkapy("serve", "--config", str(properties), "--override", EPHEMERAL)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"kafkapy serve: error: {properties}, line 2: malformed \\uXXXX escape '\\\\u0g9a'"]


ROOT = Path(__file__).resolve().parents[1]


def test_version_is_the_packages() -> None:
    import tomllib

    result = kafkapy("--version")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (result.returncode, result.stdout) == (0, f"kafkapy {version}\n")
    as_package = subprocess.run([sys.executable, "-m", "kafkapy", "--version"], capture_output=True,
                                text=True, timeout=30)  # python -m kafkapy: the same command
    assert (as_package.returncode, as_package.stdout) == (0, f"kafkapy {version}\n")


def test_the_readme_shows_every_subcommand() -> None:
    from kafkapy.cli import _subparsers, build_parser

    readme = (ROOT / "README.md").read_text()
    top = next(_subparsers(build_parser())).prog.split()[0]
    names = {sub.prog.split()[1] for sub in _subparsers(build_parser()) if len(sub.prog.split()) == 2}
    assert top == "kafkapy" and {"demo", "serve", "decode", "spark-decode"} <= names
    assert [name for name in sorted(names) if f"kafkapy {name} " not in readme] == []
    assert "kafkapy --version" in readme


def test_the_shipped_config_file_serves_without_a_warning() -> None:
    server = Served("--config", str(ROOT / "config" / "server.properties"), "--override", EPHEMERAL)
    try:
        _, host, port = server.wait_listening()
        result = kafkapy("broker-metadata", "--bootstrap-server", f"{host}:{port}", "--json")
        (broker,) = json.loads(result.stdout)["brokers"]
        assert broker["node_id"] == 0
        assert server.stop() == 0
    finally:
        server.kill()
    assert not [line for line in server.stderr if "WARNING" in line], server.stderr


def test_settings_of_the_default_modules_are_not_warned_about() -> None:
    """The transactions, share group and share coordinator modules are not entry points: their keys
    were reported "unknown (ignored)" though the broker used them. Only the misspelt one is now."""
    server = Served("--override", EPHEMERAL, "--override", "transaction.max.timeout.ms=60000",
                    "--override", "group.share.delivery.count.limit=3",
                    "--override", "share.coordinator.state.topic.num.partitions=3",
                    "--override", "trnsaction.max.timeout.ms=5")
    try:
        server.wait_listening()
        assert server.stop() == 0
    finally:
        server.kill()
    warnings = [line.split("WARNING ", 1)[1].strip() for line in server.stderr if "WARNING" in line]
    assert warnings == ["kafkapy.server.config: unknown configuration key 'trnsaction.max.timeout.ms' "
                        "(ignored); did you mean 'transaction.max.timeout.ms'?"], server.stderr


def test_a_reader_that_goes_away_is_no_traceback() -> None:
    # Unbuffered, so the demo's lines are written as it goes and the ones after the first meet
    # a closed pipe (buffered, they would all be written at exit).
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy.cli", "demo"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()  # as `| head -c 10` does
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 0 and err == ""


def test_serve_starts_without_importing_kafka_python() -> None:
    """kafka-python is not imported to serve (keyed records are placed by
    kafkapy.protocol.partitioner): importing it costs every command about 70 ms of start-up, and
    the toolkit's tests start ``serve`` often."""
    code = ("import sys\nfrom kafkapy.cli import main\n"
            "assert main(['serve', '--brokers', '0']) == 2\n"
            "print(sorted(m for m in sys.modules if m == 'kafka' or m.startswith('kafka.')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_bad_seed_file_is_refused_before_the_broker_modules_load(tmp_path: Path) -> None:
    """The refusal is one line either way; this keeps it from waiting for kafkapy.embedded's imports."""
    seed = tmp_path / "seed.json"
    seed.write_text("{oops")
    code = ("import sys\nfrom kafkapy.cli import main\n"
            f"assert main(['serve', '--brokers', '2', '--seed', {str(seed)!r}]) == 2\n"
            "print('kafkapy.embedded' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_serve_with_log_dirs_alone_says_where_it_keeps_the_metadata(tmp_path: Path) -> None:
    """Without zookeeper.connect the metadata is kept beside the logs (metadata.log.dir, the first
    of log.dirs), as Kafka's KRaft metadata log is: said once at start, with no warning."""
    server = Served("--override", EPHEMERAL, "--override", f"log.dirs={tmp_path}")
    try:
        server.wait_listening()
        assert server.stop() == 0
    finally:
        server.kill()
    assert not [line for line in server.stderr if " WARNING " in line]
    said = [line.split("INFO kafkapy.store.durable: ", 1)[1] for line in server.stderr
            if "INFO kafkapy.store.durable: " in line]
    assert len(said) == 1 and said[0].endswith(f" in {tmp_path}: 0 topics, 0 changes read\n"), said
    assert (tmp_path / "kafkapy-metadata.snapshot").is_file()
