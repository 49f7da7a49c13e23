"""The ``kafkapy`` command: ``serve`` a broker, ask one for ``broker-metadata``, or run the codec ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import json
import logging
import os
import pkgutil
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import kafkapy
import kafkapy.commands
from kafkapy.client import ClientError, SimpleClient, host_port_argument
from kafkapy.commands._numbers import java_int, timeout_seconds
from kafkapy.protocol import (
    api_name,
    catalogue,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


def _demo(_: argparse.Namespace) -> int:
    """Encode and decode a client's opening exchange, showing what the codec sees."""
    exchange: list[tuple[int, int, dict[str, Any], dict[str, Any]]] = [
        (18, 3, {"client_software_name": "kafkapy-demo", "client_software_version": "0.1"},
         {"error_code": 0, "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}],
          "throttle_time_ms": 0}),
        (3, 12, {"topics": None, "allow_auto_topic_creation": False},
         {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
          "cluster_id": "kafkapy-demo", "controller_id": 1, "topics": []}),
    ]
    for correlation_id, (key, version, request_body, response_body) in enumerate(exchange, 1):
        frame = encode_request(key, version, correlation_id, "demo", request_body)
        request = decode_request(frame)
        print(f"-> {api_name(key)} v{version} request, {len(frame)} bytes: {frame.hex()}")
        print(f"   {json.dumps(_plain(request.body))}")
        frame = encode_response(key, version, correlation_id, response_body)
        response = decode_response(frame, key, version)
        print(f"<- {api_name(key)} v{version} response, {len(frame)} bytes")
        print(f"   {json.dumps(_plain(response.body))}")
    print(f"\n{len(catalogue())} APIs in the catalogue; `kafkapy serve` runs a broker on 127.0.0.1:9092.")
    return 0


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# --- serve ---------------------------------------------------------------------------------

def _configure_logging() -> None:
    """INFO and above on stderr, so `listening on NAME://host:port` shows (unless already configured)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)


async def _serve_until_signalled(config: Any) -> None:
    from kafkapy.assembly import assemble

    log = logging.getLogger("kafkapy.cli")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    # Handlers go in before the listeners bind, so a signal sent as soon as
    # `listening on` shows is never missed.
    handled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            handled.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            pass
    try:
        runtime = assemble(config)
        await runtime.start()
        try:
            # A signal, or the broker shutting itself down (an incompatible finalized feature).
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(runtime.failed.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        finally:
            if runtime.failure is None:
                log.info("%s: stopping broker %d", received[0] if received else "exit", runtime.broker_id)
            await runtime.stop()
            log.info("stopped")
        if runtime.failure is not None:
            from kafkapy.errors import KafkaPyError

            raise KafkaPyError(f"broker {runtime.broker_id} shut down: {runtime.failure}")
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


async def _serve_cluster_until_signalled(config: Any, brokers: int, seed_file: str | None,
                                         control: str | None = None,
                                         control_allow_remote: bool = False, clock: Any = None,
                                         racks: list[str] | None = None) -> None:
    """``serve --brokers N`` / ``--seed FILE`` / ``--control HOST:PORT``: the embedded Broker on this
    loop, N brokers sharing one store (kafkapy.embedded), seeded before anyone is told it is up.
    ``clock`` (``--virtual-clock``): a VirtualClock whose loop this runs on."""
    from kafkapy.errors import KafkaPyError
    from kafkapy.seeding import load_seed_file

    log = logging.getLogger("kafkapy.cli")
    # A bad file fails before any bind, and before the broker's modules load (a quarter of a
    # second of imports that its one error line need not wait for).
    seed = load_seed_file(seed_file) if seed_file else None
    from kafkapy.embedded import Broker
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
        except (NotImplementedError, RuntimeError):
            pass
    settings = dict(config.originals)
    if control is not None:  # what GET /history answers from
        from kafkapy.observers.history import with_history

        settings = with_history(settings)
    # A bad control address fails here, before any listener binds.
    broker = Broker(settings, brokers=brokers, defaults={}, control=control,
                    control_allow_remote=control_allow_remote, clock=clock, racks=racks)
    try:
        await broker.start()
        try:
            if seed:
                await broker.seed_async(seed)
                log.info("seeded %d topic(s) from %s", len(seed), seed_file)
            if broker.control is not None:
                log.info("control endpoint on %s", broker.control.url)
            if clock is not None:
                log.info("on a virtual clock: broker time moves only on POST /clock/advance")
            log.info("serving %d broker(s), bootstrap servers %s", brokers, broker.bootstrap_servers)
            runtimes = [m.runtime for m in broker.brokers if m.runtime is not None]
            waits = [asyncio.ensure_future(stop.wait()),
                     *(asyncio.ensure_future(r.failed.wait()) for r in runtimes)]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
            failed = next((r for r in runtimes if r.failure is not None), None)
        finally:
            await broker.stop()
            log.info("stopped")
        if failed is not None:
            raise KafkaPyError(f"broker {failed.broker_id} shut down: {failed.failure}")
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def default_module_keys() -> list[Any]:
    """The default modules' config keys; imports them all, so only asked for when a key looks
    unknown (a refusal before serving stays quick)."""
    from kafkapy.assembly import default_module_keys as keys

    return keys()


def _image_settings(config_file: str | None) -> tuple[dict[str, str], list[str]]:
    """``serve --env``: the settings the apache/kafka image would run with, from this process's
    environment and the ``--config`` file (kafkapy.server.environment), and the keys the
    environment gave (or the image's default file)."""
    from pathlib import Path

    from kafkapy.server.config import load_properties
    from kafkapy.server.environment import settings_from_environment

    file_settings = load_properties(Path(config_file)) if config_file else None
    settings = settings_from_environment(os.environ, file_settings)
    return settings, sorted(key for key, value in settings.items() if (file_settings or {}).get(key) != value)


def _serve(args: argparse.Namespace) -> int:
    from kafkapy.errors import KafkaPyError
    from kafkapy.server.config import BrokerConfig

    _configure_logging()
    try:
        def declared() -> list[str]:
            return [key.name for key in default_module_keys()]

        if args.env:
            settings, from_environment = _image_settings(args.config)
            config = BrokerConfig.build(settings, overrides=args.override, declared=declared)
            logging.getLogger("kafkapy.cli").info("settings from the environment (--env): %s",
                                                  ", ".join(from_environment) or "none")
        else:
            config = BrokerConfig.build(properties=args.config, overrides=args.override, declared=declared)
        if args.brokers < 1:
            raise KafkaPyError(f"--brokers must be at least 1, not {args.brokers}")
        racks = args.racks.split(",") if args.racks else None
        if racks is not None and len(racks) != args.brokers:
            raise KafkaPyError(f"--racks names {len(racks)} racks for {args.brokers} broker(s): "
                               "one per broker")
        if args.control_allow_remote and not args.control:
            raise KafkaPyError("--control-allow-remote needs --control HOST:PORT")
        if args.virtual_clock and not args.control:
            raise KafkaPyError("--virtual-clock needs --control HOST:PORT: the clock moves only on "
                               "POST /clock/advance")
        if args.virtual_clock:
            from kafkapy.server.clock import VirtualClock

            # The brokers run on the clock's own loop (Broker(clock=...) asks for it), in this thread.
            clock = VirtualClock()
            clock.run(_serve_cluster_until_signalled(config, args.brokers, args.seed, args.control,
                                                     args.control_allow_remote, clock, racks))
        elif args.brokers > 1 or args.seed or args.control or racks:
            asyncio.run(_serve_cluster_until_signalled(config, args.brokers, args.seed, args.control,
                                                       args.control_allow_remote, racks=racks))
        else:
            asyncio.run(_serve_until_signalled(config))
    except KafkaPyError as exc:  # a bad config, an unreachable or corrupt metadata store
        print(f"kafkapy serve: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"kafkapy serve: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a SIGINT before the handlers were installed
        return 130
    return 0


# --- broker-metadata -----------------------------------------------------------------------

BROKER_METADATA = 1010


def fetch_broker_metadata(bootstrap: str, node_ids: Sequence[int] = (), timeout: float = 10.0
                          ) -> list[dict[str, Any]]:
    """Send one BrokerMetadata v0 request and return the plain brokers list of the answer."""
    with SimpleClient(bootstrap, timeout) as client:
        body = client.request(BROKER_METADATA, 0, {"node_ids": list(node_ids)})
    brokers: list[dict[str, Any]] = _plain(body)["brokers"]
    return brokers


def _format_table(brokers: Sequence[dict[str, Any]]) -> str:
    headers = ("NODE", "HOST", "PORT", "PROTOCOL", "TAGS")
    rows = [(str(b["node_id"]), b["host"], str(b["port"]),
             f"{b['protocol_version_min']}-{b['protocol_version_max']}",
             " ".join(f"{t['key']}={t['value']}" for t in b["tags"])) for b in brokers]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (headers, *rows)]
    return "\n".join(lines)


def _broker_metadata(args: argparse.Namespace) -> int:
    try:
        brokers = fetch_broker_metadata(args.bootstrap_server, args.node_id or (), args.timeout)
    except ClientError as exc:
        print(f"kafkapy broker-metadata: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"brokers": brokers}, indent=2))
    elif brokers:
        print(_format_table(brokers))
    missing = sorted(set(args.node_id or ()) - {b["node_id"] for b in brokers} - {-1})
    if missing or not brokers:
        # Asked for a broker the cluster does not have: a failed lookup, as kafka-configs exits 1.
        wanted = ", ".join(map(str, missing)) if missing else "any"
        print(f"kafkapy broker-metadata: no broker with node id {wanted}", file=sys.stderr)
        return 1
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with every usage error as one line on stderr and exit 2 (argparse's own code),
    in every subcommand: subparsers are made of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


# What str.splitlines() breaks a line at: a value echoed in a message keeps the message one line
# by showing these escaped, as repr() would.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(message: str) -> str:
    """``message`` with the line breaks of the values it quotes escaped."""
    return message.translate(_LINE_BREAKS)


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub
                yield from _subparsers(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kafkapy", description="Kafka's wire protocol from the broker side.")
    parser.add_argument("--version", action="version", version=f"kafkapy {kafkapy.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="encode and decode a sample exchange",
        description="Encode and decode a client's opening exchange (ApiVersions v3, then Metadata v12), "
                    "printing each frame's bytes and the bodies the codec reads back. No network.")
    demo.set_defaults(func=_demo)

    serve = commands.add_parser(
        "serve", help="run a broker until SIGTERM or SIGINT",
        description="Run a broker on asyncio. Settings, in increasing precedence: defaults, --config, "
                    "the environment (with --env), --override. Logs `listening on NAME://host:port` per "
                    "listener on stderr.")
    serve.add_argument("--config", metavar="FILE", help="a server.properties-style file")
    serve.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                       help="a setting, e.g. listeners=PLAINTEXT://127.0.0.1:0 (repeatable)")
    serve.add_argument("--env", action="store_true",
                       help="also read KAFKA_* variables and CLUSTER_ID as the apache/kafka Docker image "
                            "does (KAFKA_ADVERTISED_LISTENERS is advertised.listeners; over --config, "
                            "under --override)")
    serve.add_argument("--brokers", metavar="N", type=int, default=1,
                       help="run N brokers in this process sharing one store, ids broker.id (or 0) "
                            "and up, on consecutive ports (ephemeral ones for port 0)")
    serve.add_argument("--racks", metavar="RACK,...",
                       help="each broker's broker.rack, in order, one per --brokers (for rack-aware clients: "
                            "KIP-392 with replica.selector.class)")
    serve.add_argument("--seed", metavar="FILE",
                       help="create these topics and records first: JSON, or YAML with PyYAML installed "
                            "({\"topic\": {\"partitions\": 3, \"config\": {...}, \"records\": [...]}})")
    serve.add_argument("--control", metavar="HOST:PORT",
                       help="serve the HTTP/JSON control endpoint there (faults, seed, snapshots, reset, "
                            "records, history, brokers, clock, cluster faults; GET /openapi.json): a "
                            "loopback address, e.g. 127.0.0.1:8080 (port 0: any)")
    serve.add_argument("--control-allow-remote", action="store_true",
                       help="let --control bind a non-loopback address (the endpoint has no authentication)")
    serve.add_argument("--virtual-clock", action="store_true",
                       help="run the brokers on a virtual clock that stands still until POST /clock/advance "
                            "(needs --control): session, transaction and retention timeouts on demand")
    serve.set_defaults(func=_serve)

    metadata = commands.add_parser(
        "broker-metadata", help="ask a broker for BrokerMetadata (api key 1010)",
        description="Send BrokerMetadata v0 and print each broker's address, protocol version range "
                    "and tags.")
    metadata.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    metadata.add_argument("--node-id", metavar="N", type=java_int, action="append",
                          help="describe only this broker (repeatable; -1: the one asked); default all")
    metadata.add_argument("--json", action="store_true", help="print JSON instead of a table")
    metadata.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                          help="connect and read timeout (default 10)")
    metadata.set_defaults(func=_broker_metadata)

    for found in pkgutil.iter_modules(kafkapy.commands.__path__):
        if found.name.startswith("_"):  # shared helpers of the commands, not commands
            continue
        importlib.import_module(f"kafkapy.commands.{found.name}").register(commands)
    # One HOST:PORT rule and one --timeout rule for every command that connects, checked as
    # usage errors.
    for sub in _subparsers(parser):
        for action in sub._actions:
            if "--bootstrap-server" in action.option_strings:
                action.type = host_port_argument
            if "--timeout" in action.option_strings:
                action.type = timeout_seconds
    return parser


def _print_arguments_as_given() -> None:
    """A command-line argument that is not UTF-8 is held as surrogate escapes; echoed on a stdout
    that is strict (a UTF-8 locale's) it was a UnicodeEncodeError traceback. Print its bytes back
    as they were given instead. Only the process's own stdout: a caller's replacement is its own."""
    if sys.stdout is sys.__stdout__ and isinstance(sys.stdout, io.TextIOWrapper) \
            and sys.stdout.errors == "strict":
        sys.stdout.reconfigure(errors="surrogateescape")


def main(argv: Sequence[str] | None = None) -> int:
    _print_arguments_as_given()
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
        sys.stdout.flush()  # here, where a reader gone away is caught, not at exit
    except BrokenPipeError:
        # The reader went away (`kafkapy demo | head`): not an error of ours. Python's advice:
        # point stdout at devnull so the flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # Ctrl-C while a command waits on a broker: the shell's status for SIGINT (128 + 2), which
        # a JVM tool exits with too, without Python's traceback.
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
