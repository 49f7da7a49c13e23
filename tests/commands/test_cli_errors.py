"""The error paths of the ``kafkapy`` commands: what each says and its exit status when a group,
topic or value is wrong, checked against what Kafka's own tools do (docs/cli.md, "Errors and exit
codes"). The CLI runs as a process (PYTHONPATH set to this tree, so a worktree tests its own code)
against an embedded broker, and in-process for the sweeps."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from quick_clients import commit_offset

from kafkapy import Broker
from kafkapy.cli import build_parser, main
from kafkapy.errors import ErrorCode
from kafkapy.faults import ErrorAnswer, FaultRule
from kafkapy.protocol.api_keys import ApiKey

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "orders"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``kafkapy`` command, importing this tree's code."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kafkapy.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)


def in_process(*args: str) -> tuple[int, str, str]:
    """``main(args)`` in this process: exit status, stdout, stderr (argparse's exits included)."""
    # stdout as main() leaves a real one: an argument's bytes that are not UTF-8 are printed back
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exited:
            code = exited.code if isinstance(exited.code, int) else 1
        out.flush()
    written = out.buffer.getvalue().decode(errors="replace")  # type: ignore[attr-defined]
    return code, written, err.getvalue()


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        running.seed({TOPIC: {"partitions": 2, "records": [{"value": "v"} for _ in range(4)]}})
        yield running


def _commit(broker: Broker, group: str, offset: int) -> None:
    """A classic group with a committed offset and no member (Empty), made by confluent-kafka."""
    commit_offset(broker.bootstrap_servers, group, TOPIC, offset)


def _join_and_leave(broker: Broker, group: str) -> None:
    """A classic group a consumer joined and left without committing: Empty, without offsets."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the consumer never joined"
    finally:
        consumer.close()


# --- groups --describe of a group that does not exist --------------------------------------

@pytest.mark.parametrize("view", [(), ("--members",), ("--state",), ("--offsets",)])
def test_describing_a_group_that_does_not_exist_fails(broker: Broker, view: tuple[str, ...]) -> None:
    """kafka-consumer-groups.sh says "Consumer group 'G' does not exist." of a Dead group (and
    fails with GroupIdNotFoundException on a Kafka 4 broker); kafkapy says it on stderr and exits 1,
    as kafka-share-groups.sh and kafkapy share-groups do for theirs (it exited 0)."""
    described = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--group",
                    "ghost", *view)
    assert (described.returncode, described.stdout, described.stderr) == (
        1, "", "Error: Consumer group 'ghost' does not exist.\n")


def test_the_other_groups_are_still_described(broker: Broker) -> None:
    """One missing group of several: the others' rows are printed, then the command fails."""
    _commit(broker, "kept", 1)
    described = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--describe",
                    "--group", "ghost", "--group", "kept", "--json")
    assert described.returncode == 1
    assert described.stderr.splitlines() == ["Consumer group 'kept' has no active members.",
                                             "Error: Consumer group 'ghost' does not exist."] or \
        described.stderr.splitlines() == ["Error: Consumer group 'ghost' does not exist.",
                                          "Consumer group 'kept' has no active members."]
    assert '"group": "kept", "topic": "orders", "partition": 0, "current_offset": 1' in described.stdout


def test_an_empty_group_without_offsets_prints_no_table(broker: Broker) -> None:
    """As Kafka's tool: an Empty group is "no active members" (exit 0), and with no row to show
    no header either (kafkapy printed a lone header line)."""
    _join_and_leave(broker, "drifted")
    described = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--group",
                    "drifted")
    assert (described.returncode, described.stdout, described.stderr) == (
        0, "", "Consumer group 'drifted' has no active members.\n")


def test_share_groups_and_groups_agree_on_a_missing_group(broker: Broker) -> None:
    shared = cli("share-groups", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--group",
                 "ghost")
    assert (shared.returncode, shared.stderr) == (1, "Error: Share group 'ghost' does not exist.\n")


@pytest.mark.parametrize(("argv", "said"), [
    (("groups", "--reset-offsets", "--group", "g", "--to-earliest"),
     "kafkapy groups: one of --topic or --all-topics is required with --reset-offsets"),
    (("groups", "--reset-offsets", "--group", "g", "--topic", "orders:x", "--to-earliest"),
     "kafkapy groups: --topic 'orders:x': partitions must be numbers, as in orders:0,1"),
    (("share-groups", "--reset-offsets", "--group", "g", "--topic", "orders:x", "--to-earliest"),
     "kafkapy share-groups: --topic 'orders:x': partitions must be numbers, as in orders:0,1"),
])
def test_group_flags_are_read_before_anything_is_sent(argv: tuple[str, ...], said: str) -> None:
    """A reset without a scope and a --topic whose partitions are not numbers are usage errors
    (exit 2) even when no broker answers; they were found after connecting, so an unreachable
    broker hid them behind 'cannot connect' (exit 1)."""
    code, out, err = in_process(argv[0], "--bootstrap-server", "127.0.0.1:1", *argv[1:])
    assert (code, out, err) == (2, "", said + "\n")


def test_ctrl_c_while_a_broker_keeps_silent_is_status_130_without_a_traceback() -> None:
    """A broker that takes the connection and never answers; SIGINT after the command has sent its
    first request: exit 130, as a JVM tool on Ctrl-C, and nothing on stderr (it was Python's
    KeyboardInterrupt traceback from the socket read)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        argv = ["groups", "--bootstrap-server", f"127.0.0.1:{port}", "--list"]
        command = subprocess.Popen([sys.executable, "-m", "kafkapy.cli", *argv], env=env, cwd=ROOT, text=True,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            connection, _ = silent.accept()  # the command connected and now waits for an answer
            with connection:
                connection.settimeout(30)
                assert connection.recv(4), "no request came"
                command.send_signal(signal.SIGINT)
                out, err = command.communicate(timeout=30)
        finally:
            command.kill()
    assert (command.returncode, out, err) == (130, "", "")


def test_a_delimiter_or_header_that_is_not_utf8_is_taken_as_its_bytes(broker: Broker) -> None:
    """A command line's bytes that are not UTF-8 (Python holds them as surrogate escapes) in -K, -D
    or -H are the bytes given, as kcat takes them; -K was a UnicodeEncodeError traceback in produce
    and consume, and -H a usage error quoting the codec."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    bootstrap = broker.bootstrap_servers.encode()
    produced = subprocess.run([sys.executable, "-m", "kafkapy.cli", "produce", "-b", bootstrap, "-t", "raw",
                               "-p", "0", "-K", b"\xff", "-H", b"h=\xfe"], input=b"k\xffv\n",
                              capture_output=True, timeout=60, env=env, cwd=ROOT)
    assert (produced.returncode, produced.stderr) == (0, b"")
    consumed = subprocess.run([sys.executable, "-m", "kafkapy.cli", "consume", "-b", bootstrap, "-t", "raw",
                               "-e", "-K", b"\xff"], capture_output=True, timeout=60, env=env, cwd=ROOT)
    assert (consumed.returncode, consumed.stdout, consumed.stderr) == (0, b"k\xffv\n", b"")
    as_json = subprocess.run([sys.executable, "-m", "kafkapy.cli", "consume", "-b", bootstrap, "-t", "raw",
                              "-e", "-J"], capture_output=True, timeout=60, env=env, cwd=ROOT)
    record = json.loads(as_json.stdout)
    assert (record["key"], record["value"], record["headers"]) == (
        "k", "v", [{"key": "h", "value": {"base64": "/g=="}}])


def test_an_argument_that_is_not_utf8_is_printed_back_as_given(tmp_path: Path) -> None:
    """On a strict UTF-8 stdout (a UTF-8 locale's; PYTHONIOENCODING says so here) a file name that
    is not UTF-8 is printed as its bytes; it was a UnicodeEncodeError traceback."""
    path = bytes(tmp_path) + b"/x\xff.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8:strict")
    dumped = subprocess.run([sys.executable, "-m", "kafkapy.cli", "dump-log", "--files", path],
                            capture_output=True, timeout=60, env=env, cwd=ROOT)
    assert (dumped.returncode, dumped.stdout) == (1, b"Dumping " + path + b"\n")
    assert dumped.stderr.count(b"\n") == 1 and b"not named by its base offset" in dumped.stderr


# --- values every connecting command takes --------------------------------------------------

def _commands_with(option: str) -> list[list[str]]:
    """Each (sub)command path whose parser takes ``option``, e.g. ["features", "describe"]."""
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if option in action.option_strings and path:
                found.append(path)
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])

    walk(build_parser(), [])
    return found


TIMEOUT_COMMANDS = _commands_with("--timeout")


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "1e300", "soon"])
def test_a_bad_timeout_is_a_usage_error_in_every_command(value: str) -> None:
    """--timeout below or at 0, NaN, infinite or past Kafka's int of ms reached the socket or the
    clock as a traceback (ValueError: Timeout value out of range, OverflowError); now one line,
    exit 2, before anything connects."""
    assert len(TIMEOUT_COMMANDS) >= 15
    for path in TIMEOUT_COMMANDS:
        # A subcommand's --timeout (features describe) comes after its name; the others' anywhere.
        code, _, err = in_process(*path, "--bootstrap-server", "127.0.0.1:1", "--timeout", value)
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1, (path, code, err)
        assert f"argument --timeout: '{value}' is not a number of seconds above 0" in lines[0], path


def test_a_bad_timeout_as_a_process() -> None:
    refused = cli("groups", "--bootstrap-server", "127.0.0.1:1", "--list", "--timeout", "-1")
    assert refused.returncode == 2
    assert refused.stderr == ("kafkapy groups: error: argument --timeout: '-1' is not a number of seconds "
                              "above 0 and at most 2147483.647 (see kafkapy groups --help)\n")


def test_broker_metadata_node_id_is_a_java_int(broker: Broker) -> None:
    """A --node-id past an int32 was an EncodeError traceback; BrokerMetadata's node_ids are int32."""
    refused = cli("broker-metadata", "--bootstrap-server", broker.bootstrap_servers, "--node-id",
                  "99999999999999999999")
    assert refused.returncode == 2
    assert refused.stderr.startswith("kafkapy broker-metadata: error: argument --node-id: "
                                     "'99999999999999999999' is not a Java int")


def test_configs_of_a_missing_topic_name_the_error_only(broker: Broker) -> None:
    """Kafka's DescribeConfigs answers an unknown topic with UNKNOWN_TOPIC_OR_PARTITION and no
    message; kafkapy printed the missing message as 'None'."""
    refused = cli("configs", "--bootstrap-server", broker.bootstrap_servers, "--describe",
                  "--entity-type", "topics", "--entity-name", "ghost")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "kafkapy configs: error UNKNOWN_TOPIC_OR_PARTITION\n")


# --- a broker that answers every request with an error ------------------------------------

_ANSWERED = [  # one line of each command, each of its APIs then answered with an error
    ("topics", "--describe", "--topic", TOPIC), ("topics", "--create", "--topic", "fresh"),
    ("topics", "--alter", "--topic", TOPIC, "--partitions", "3"), ("groups", "--list"),
    ("groups", "--describe", "--group", "g", "--members"), ("groups", "--delete", "--group", "g"),
    ("groups", "--reset-offsets", "--group", "g", "--topic", TOPIC, "--to-earliest", "--execute"),
    ("groups", "--delete-offsets", "--group", "g", "--topic", TOPIC), ("share-groups", "--list"),
    ("share-groups", "--describe", "--group", "g"), ("transactions", "list"),
    ("transactions", "describe", "--transactional-id", "t"),
    ("configs", "--describe", "--entity-type", "topics", "--entity-name", TOPIC),
    ("configs", "--describe", "--entity-type", "users", "--entity-name", "u"),
    ("features", "upgrade", "--feature", "kafkapy.ip_quota", "--version", "1"), ("acls", "--list"),
    ("reassign-partitions", "--list"), ("get-offsets", "--topic", TOPIC), ("log-dirs", "--describe"),
    ("leader-election", "--election-type", "preferred", "--all-topic-partitions"),
    ("client-metrics", "--list"), ("consume", "-t", TOPIC, "-e"),
]


@pytest.mark.parametrize("code", [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
def test_a_broker_answering_errors_fails_each_command_in_words(broker: Broker, code: ErrorCode) -> None:
    """Every API but ApiVersions and Metadata answered with ``code`` (fault injection): each
    command exits 1 and says why. A retriable error is retried until --timeout; it escaped as a
    Retry traceback from topics --describe (DescribeConfigs), --list of groups and share groups
    (ListGroups) and transactions list (ListTransactions)."""
    handles = [broker.faults.add(FaultRule(ErrorAnswer(code), api=api)) for api in ApiKey
               if api not in (ApiKey.API_VERSIONS, ApiKey.METADATA)]
    try:
        for argv in _ANSWERED:
            status, _, err = in_process(argv[0], "--bootstrap-server", broker.bootstrap_servers,
                                        "--timeout", "0.3", *argv[1:])
            assert status == 1 and err.strip() and "Traceback" not in err, (argv, status, err)
    finally:
        for handle in handles:
            handle.remove()


def test_describing_every_broker_stops_at_the_first_refusal(broker: Broker) -> None:
    """kafka-configs.sh --describe --entity-type brokers fails at the first broker it may not
    describe; kafkapy went on and printed the refusal once per broker and for the default."""
    refusal = FaultRule(ErrorAnswer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), api=ApiKey.DESCRIBE_CONFIGS)
    with broker.faults.injected(refusal):
        status, out, err = in_process("configs", "--bootstrap-server", broker.bootstrap_servers,
                                      "--describe", "--entity-type", "brokers")
    assert (status, out, err) == (1, "", "kafkapy configs: error CLUSTER_AUTHORIZATION_FAILED\n")


# --- any command line: an exit status and a line, never a traceback -------------------------

_VALUES = ["0", "-1", "1", "2", "-2", "99999999999999999999", "nan", "inf", "1e400", "x", "", ",", "=",
           "a=b", "orders", "orders:0", "orders:x", "orders:0-", "127.0.0.1:1", "g", "User:a", "Read", "all",
           "earliest", "latest", "P1D", "PT-1H", "2024-01-01T00:00:00", "s@5", "-", "[", "{}", "1.5",
           "\udcff", "k\udcfe=v",  # a command line's bytes that are not UTF-8, as Python holds them
           "²", "127.0.0.1:²", "orders:²"]  # a digit to str.isdigit, not to int()
_FILES = {"bad.json": b"{bad", "00000000000000000000.log": b"\x00\x01garbage", "stdin.txt": b"k:v\nnext\n",
          "².log": b""}


def _commands() -> dict[str, argparse.ArgumentParser]:
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


# serve runs a broker until a signal; spark-decode starts a JVM.
_FUZZED = sorted(set(_commands()) - {"serve", "spark-decode"})


def _options(name: str) -> list[str]:
    """Every option string of the command and of its subcommands, and the subcommands' names."""
    options: list[str] = []
    stack = [_commands()[name]]
    while stack:
        sub = stack.pop()
        for action in sub._actions:
            options.extend(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                options.extend(action.choices)
                stack.extend(action.choices.values())
    return options


_OPTIONS = {name: _options(name) for name in _FUZZED}


def test_any_command_line_gets_a_status_and_a_line_never_a_traceback(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Random command lines of every command (its own options, with values right, wrong or out of
    range, against a port nothing listens on): each ends in exit 0, 1 or 2 with a usage error as one
    line, never an exception out of main. It found the --timeout and --node-id tracebacks."""
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    for name, data in _FILES.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)  # a command that writes a file (decode --output x) writes it here
    files = [str(tmp_path / name) for name in (*_FILES, "missing.json")]
    # A process's arguments cannot hold NUL; any other text can come, but no "/": a file a command
    # writes (decode --output, --summary-plot) must land in tmp_path, never at the root.
    words = st.one_of(st.sampled_from([*_VALUES, *files]),
                      st.text(max_size=6).filter(lambda t: "\x00" not in t and "/" not in t))

    @st.composite
    def command_lines(draw: st.DrawFn) -> list[str]:
        name = draw(st.sampled_from(_FUZZED))
        argv = [name]
        if "--bootstrap-server" in _OPTIONS[name] and draw(st.integers(0, 9)) > 0:
            argv += ["--bootstrap-server", "127.0.0.1:1"]
        for _ in range(draw(st.integers(0, 6))):
            argv.append(draw(st.sampled_from(_OPTIONS[name])))
            if draw(st.integers(0, 9)) < 7:
                argv.append(draw(words))
        return argv

    @settings(max_examples=600, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(command_lines())
    @example(["get-offsets", "--bootstrap-server", "127.0.0.1:1", "--timeout", "-1"])
    @example(["broker-metadata", "--bootstrap-server", "127.0.0.1:1", "--node-id", "99999999999999999999"])
    @example(["get-offsets", "--partitions", "\x1e"])  # a line break to str.splitlines
    @example(["topics", "--bootstrap-server", "127.0.0.1:²", "--list"])
    @example(["dump-log", "--files", "².log"])
    def run(argv: list[str]) -> None:
        with open(tmp_path / "stdin.txt") as stdin:
            saved, sys.stdin = sys.stdin, stdin
            try:
                code, _, err = in_process(*argv)
            finally:
                sys.stdin = saved
        assert "Traceback" not in err, (argv, err)
        assert code in (0, 1, 2), (argv, code, err)
        if code == 2:
            assert len(err.splitlines()) == 1, (argv, err)
        if code == 1:
            assert err.strip(), (argv, "a failure with nothing said")

    run()
