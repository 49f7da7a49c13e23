"""``kafkapy decode CAPTURE...``: decode captured Kafka traffic into request/response rows."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, TextIO

from kafkapy.capture import options
from kafkapy.capture.filters import RowFilter
from kafkapy.capture.keylog import KeyLog
from kafkapy.capture.rows import Row, decode_capture, open_keylog, to_json, write_parquet
from kafkapy.capture.summary import Summary
from kafkapy.capture.tcp import DEFAULT_KAFKA_PORTS
from kafkapy.protocol.error_sites import error_name

STDIN = "-"
# ``reason`` last: it is "-" for ok rows, and a sentence (wrapped within its column) for the others.
_TABLE_COLUMNS = ("ts", "src", "dst", "api_name", "api_version", "correlation_id", "client_id",
                  "error_code", "errors", "latency_ms", "status", "reason")
# the errors cell lists this many entries, then how many more there are
_ERRORS_SHOWN = 3


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "decode",
        help="decode pcap/pcapng captures into Kafka request/response rows",
        description="Decode Kafka traffic in pcap/pcapng captures: one row per request/response "
        "exchange, bodies as JSON.",
    )
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help="pcap or pcapng files; - reads stdin")
    add_common_options(p)
    p.add_argument("--format", choices=("jsonl", "table", "parquet"), default="jsonl")
    p.add_argument("--output", "-o", metavar="PATH", help="output file (default stdout; parquet needs one)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    p.set_defaults(func=run)


def add_common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kafka-port", type=port_number, action="append", metavar="P", dest="kafka_ports",
        help="a broker port (repeatable; default 9092); ports seen carrying Kafka frames are added",
    )  # fmt: skip
    p.add_argument(
        "--bodies", default="all", type=parse_bodies, metavar="all|none|API,...",
        help="decode request and response bodies of all APIs (the default), of none (header-level rows: "
        "no request, response, error_code or topics), or of the APIs listed by name or key, e.g. "
        "Produce,Fetch or 0,1",
    )  # fmt: skip
    p.add_argument("--api", type=parse_apis, metavar="API,...",
                   help="only rows of these APIs, by name or key, e.g. Produce,Fetch or 0,1")
    p.add_argument("--topic", action="append", metavar="T",
                   help="only rows whose request names this topic (repeatable: any of them)")
    p.add_argument("--client-id", action="append", metavar="C",
                   help="only rows of requests with this client id (repeatable: any of them)")
    p.add_argument("--errors-only", action="store_true",
                   help="only rows whose response has a non-zero error code (the errors column)")
    p.add_argument("--tls-keylog", metavar="FILE",
                   help="the clients' TLS key log (SSLKEYLOGFILE format): decrypts TLS connections "
                   "whose handshake is in the capture (needs cryptography: pip install 'kafkapy[tls]')")
    p.add_argument("--raw-records", action="store_true", help="keep record batches as base64, not decoded")
    p.add_argument("--summary", action="store_true", help="print a summary table to stderr")
    p.add_argument("--summary-plot", metavar="PNG", help="also draw the summary as a PNG (needs matplotlib)")


def output_problem(path: str) -> str | None:
    """Why ``path`` cannot be written as an output file, or None: checked before any decoding, so
    an unwritable output is a usage error at once, not an exception after all the work is done."""
    if os.path.isdir(path):
        return f"{path} is a directory"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"cannot write {path}: no such directory"
    if not os.access(path if os.path.exists(path) else parent, os.W_OK):
        return f"cannot write {path}: permission denied"
    return None


def outputs_problem(args: argparse.Namespace, *, output_is_file: bool = True) -> str | None:
    """The first problem with the output files these arguments name (``--output`` as a file,
    ``--summary-plot``), or None."""
    if args.summary_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return "--summary-plot needs matplotlib: pip install 'kafkapy[spark]'"
    for path in (args.output if output_is_file else None, args.summary_plot):
        problem = path and output_problem(path)
        if problem:
            return problem
    return None


def port_number(text: str) -> int:
    """``--kafka-port``: a TCP port, 1-65535."""
    try:
        return options.port_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_bodies(text: str) -> frozenset[int] | None:
    """``--bodies``: None for all APIs, else the API keys to decode bodies of."""
    value = text.strip()
    if value.lower() == "all":
        return None
    if value.lower() == "none":
        return frozenset()
    try:  # names in any case; an unknown one is echoed as typed
        return options.body_api_keys(item.strip() for item in value.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_apis(text: str) -> frozenset[int]:
    """``--api``: the API keys whose rows are kept, by name (any case) or key."""
    try:
        return RowFilter(api=text).api_keys or frozenset()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def row_filter(args: argparse.Namespace) -> RowFilter:
    """The filter of ``--api``, ``--topic``, ``--client-id`` and ``--errors-only`` (ValueError for a
    combination that could match nothing)."""
    if args.bodies == frozenset() and (args.topic or args.errors_only):
        flag = "--topic" if args.topic else "--errors-only"
        raise ValueError(f"{flag} reads decoded bodies, which --bodies none leaves out")
    return RowFilter(api=args.api, topic=args.topic, client_id=args.client_id, errors_only=args.errors_only)


def keylog_problem(args: argparse.Namespace) -> KeyLog | None:
    """``--tls-keylog`` read, before any capture is: a KeyLogError (a ValueError) for a file that
    is missing or holds no secrets, an ImportError when ``cryptography`` is not installed."""
    return open_keylog(args.tls_keylog)


def kafka_ports(args: argparse.Namespace) -> tuple[int, ...]:
    return tuple(args.kafka_ports) if args.kafka_ports else tuple(DEFAULT_KAFKA_PORTS)


class _Progress:
    """A one-line progress report on stderr, redrawn at most 10 times a second."""

    def __init__(self, stream: TextIO, total_files: int) -> None:
        self.stream = stream
        self.total_files = total_files
        self.file_index = 0
        self.name = ""
        self.size = 0
        self.rows = 0
        self._last = 0.0
        self._start = time.monotonic()

    def start_file(self, index: int, name: str) -> None:
        self.file_index, self.name = index, name
        try:
            self.size = os.path.getsize(name)
        except OSError:
            self.size = 0

    def packets(self, count: int) -> None:
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        rate = count / max(now - self._start, 1e-9)
        self.stream.write(
            f"\r[{self.file_index}/{self.total_files}] {os.path.basename(self.name)}: "
            f"{count:,} packets, {self.rows:,} rows ({rate:,.0f} packets/s)\x1b[K"
        )
        self.stream.flush()

    def done(self) -> None:
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def iter_rows(
    paths: list[str], ports: tuple[int, ...], *, decode_records: bool, progress: _Progress | None,
    errors: list[str], bodies: frozenset[int] | None = None, where: RowFilter | None = None,
    keylog: KeyLog | None = None,
) -> Iterator[Row]:  # fmt: skip
    for i, path in enumerate(paths, 1):
        callback: Callable[[int], None] | None = None
        if progress is not None:
            progress.start_file(i, path)
            callback = progress.packets
        # "-": a capture piped in (tcpdump -w - | kafkapy decode -), read as a stream; the rows'
        # capture column says "-" too.
        source: str | BinaryIO = sys.stdin.buffer if path == STDIN else path
        seen_before = where.seen if where is not None else 0
        rows = decode_capture(
            source, kafka_ports=ports, decode_records=decode_records, bodies=bodies, capture=path,
            progress=callback, row_filter=where, tls_keylog=keylog,
        )
        found = 0
        for row in rows:
            found += 1
            # a file-level error has no connection (a TLS connection's row is not one)
            if row["api_key"] is None and row["status"] == "undecodable" and row["connection_id"] is None:
                errors.append(f"{path}: {row['reason']}")
            if progress is not None:
                progress.rows += 1
            yield row
        if where is not None and where.active:
            found = where.seen - seen_before  # rows decoded, whether or not the filter kept them
        if not found:
            # A capture read to its end with no row: say why it may be, as an empty output cannot
            # (a TLS listener's traffic shows nothing until its port is named). Not an error.
            named = ", ".join(map(str, sorted(ports)))
            print(f"kafkapy decode: {path}: no Kafka traffic found (broker ports {named} and any "
                  "port seen carrying Kafka requests); a port with no plaintext request in the "
                  "capture, such as a TLS listener's, must be named with --kafka-port", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.format == "parquet" and not args.output:
        print("kafkapy decode: error: --format parquet needs --output PATH", file=sys.stderr)
        return 2
    if args.captures.count(STDIN) > 1:
        print("kafkapy decode: error: - (stdin) can be given once", file=sys.stderr)
        return 2
    problem = outputs_problem(args)
    if problem:
        print(f"kafkapy decode: error: {problem}", file=sys.stderr)
        return 2
    try:
        where = row_filter(args)
        keylog = keylog_problem(args)
    except (ValueError, ImportError) as exc:
        print(f"kafkapy decode: error: {exc}", file=sys.stderr)
        return 2
    progress = None
    if not args.no_progress and sys.stderr.isatty():
        progress = _Progress(sys.stderr, len(args.captures))
    errors: list[str] = []
    rows = iter_rows(list(args.captures), kafka_ports(args), decode_records=not args.raw_records,
                     progress=progress, errors=errors, bodies=args.bodies, where=where,
                     keylog=keylog)  # fmt: skip
    summary: Summary | None = Summary() if args.summary or args.summary_plot else None
    if summary is not None:
        rows = _tee(rows, summary)
    try:
        if args.format == "parquet":
            count = write_parquet(rows, args.output)
        else:
            out: TextIO = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
            try:
                count = _write_text(rows, out, args.format)
            finally:
                if args.output:
                    out.close()
    except BrokenPipeError:
        return 0
    finally:
        if progress is not None:
            progress.done()
    if summary is not None:
        summary.finish()
        print(summary.table(), file=sys.stderr)
        if args.summary_plot:
            summary.plot(args.summary_plot)
    for error in errors:
        print(f"kafkapy decode: {error}", file=sys.stderr)
    if args.output:
        print(f"kafkapy decode: {count} rows to {args.output}", file=sys.stderr)
    return 1 if errors else 0


def _tee(rows: Iterator[Row], summary: Summary) -> Iterator[Row]:
    for row in rows:
        summary.add(row)
        yield row


def _write_text(rows: Iterator[Row], out: TextIO, fmt: str) -> int:
    count = 0
    if fmt == "table":
        return _write_table(rows, out)
    for row in rows:
        # bodies are JSON already: embedded as objects, not as strings
        request, response = row["request"], row["response"]
        rest = {k: v for k, v in row.items() if k not in ("request", "response")}
        line = to_json(rest)
        out.write(f'{line[:-1]},"request":{request or "null"},"response":{response or "null"}}}\n')
        count += 1
    return count


# --- --format table ----------------------------------------------------------------------------

# Columns wider than this fold onto more lines instead of widening the table: a long client id
# (librdkafka's default embeds the whole program name) must not push the others out of view.
_CELL_MAX_WIDTH = 40
_REASON_MAX_WIDTH = 60  # the reason is prose: wrapped at words within this width

# rich's box.SIMPLE_HEAD drawn in ASCII: eight rows of four characters (rich.box.Box's layout),
# blank but for the rule under the header.
_ASCII_HEAD_RULE = "    \n    \n -- \n" + "    \n" * 5


def table_cells(row: Row) -> list[str]:
    """The table's cells of one row: ISO 8601 UTC timestamps to the microsecond, "-" for nothing
    (a row with no time, such as a file that is not a capture, has none)."""
    cells = []
    for name in _TABLE_COLUMNS:
        value = row.get(name)
        if name == "ts":
            value = _iso_time(value) if value else None
        elif name == "latency_ms" and value is not None:
            value = f"{value:.3f}"
        elif name == "error_code" and value:
            value = f"{value} {error_name(value)}"  # "79 MEMBER_ID_REQUIRED": the number alone says little
        elif name == "errors":
            value = _errors_cell(value) if value else None
        cells.append("-" if value is None else str(value))
    return cells


def _errors_cell(errors: list[dict[str, Any]]) -> str:
    """"3 UNKNOWN_TOPIC_OR_PARTITION orders-7; ...": each code, its name and where it sits (topic-
    partition as Kafka's tools print one, else the group, member or resource)."""
    cells = []
    for entry in errors[:_ERRORS_SHOWN]:
        where = [str(entry[key]) for key in ("group", "resource", "member") if entry.get(key) is not None]
        topic = entry.get("topic", entry.get("topic_id"))
        if topic is not None:
            partition = entry.get("partition")
            where.append(str(topic) if partition is None else f"{topic}-{partition}")
        cells.append(" ".join([str(entry["code"]), entry["name"], *where]))
    if len(errors) > _ERRORS_SHOWN:
        cells.append(f"(+{len(errors) - _ERRORS_SHOWN} more)")
    return "; ".join(cells)


def _iso_time(ts: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _write_table(rows: Iterator[Row], out: TextIO) -> int:
    """Rows as a table rich lays out: every column as wide as its widest cell (up to
    ``_CELL_MAX_WIDTH``), so headers and cells line up. The table is laid out once all rows are
    in, so only their cells are kept; jsonl and parquet stream."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    terminal = out.isatty()
    # A file or a pipe gets plain ASCII: a dashed rule under the header, no colour, no padding
    # after the last column, as wide as the table needs; a terminal gets rich's rule and its width.
    rule = box.SIMPLE_HEAD if terminal else box.Box(_ASCII_HEAD_RULE, ascii=True)
    table = Table(box=rule, show_edge=False, pad_edge=False, highlight=False)
    for name in _TABLE_COLUMNS:
        numeric = name in ("api_version", "correlation_id", "latency_ms")
        width = _REASON_MAX_WIDTH if name in ("reason", "errors") else _CELL_MAX_WIDTH
        table.add_column(name, justify="right" if numeric else "left", max_width=width, overflow="fold")
    count = 0
    for row in rows:
        table.add_row(*(Text(cell) for cell in table_cells(row)))  # Text: a "[" in a client id is no markup
        count += 1
    if terminal:
        Console(file=out, soft_wrap=False, emoji=False, markup=False).print(table)
        return count
    text = io.StringIO()
    Console(file=text, width=100_000, color_system=None, soft_wrap=False, emoji=False, markup=False,
            legacy_windows=False).print(table)
    out.writelines(line.rstrip() + "\n" for line in text.getvalue().splitlines())
    return count
