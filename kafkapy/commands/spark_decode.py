"""``kafkapy spark-decode 'captures/*.pcap' --output DIR``: decode captures on Spark into Parquet.

Everything that can be checked without Spark (the captures, the output directory, the plot path)
is checked before the JVM starts, about 9 s in. The JVM's own output (its start-up notices,
log4j) goes to a log file unless ``--verbose``: the command's stderr carries its own lines,
one per problem, as ``kafkapy decode``'s does, with the same per-file errors and exit status.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kafkapy.commands.decode import (
    add_common_options,
    kafka_ports,
    keylog_problem,
    outputs_problem,
    row_filter,
)

# The line a JVM prints for an exception that ends it, e.g. spark-submit's
# `Exception in thread "main" org.apache.spark.SparkException: Master must ...`.
# Py4J quotes the same as `: org.apache.spark.SparkException: Could not parse ...`.
_JAVA_EXCEPTION = re.compile(r"^(?:Exception in thread \"[^\"]*\" |: )?[\w.$]+(?:Exception|Error): (.+)$")


# The master URLs spark-submit accepts (SparkSubmitArguments: "Master must either be yarn or start
# with spark, k8s, or local"), checked here so a typo costs no JVM start.
_MASTER = re.compile(r"^(yarn|local(\[[^\]]+\])?|local-cluster\[[^\]]+\]|(spark|k8s)://.+)$")


def master_url(text: str) -> str:
    """``--master``: a URL Spark accepts, or a usage error."""
    if not _MASTER.match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master (local, local[N], local[*], spark://..., k8s://..., yarn)")
    return text


class _SparkFailed(Exception):
    """Spark could not start or run the job; the message is one line."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "spark-decode",
        help="decode pcap/pcapng captures on Spark, one task per file, into Parquet",
        description="Decode Kafka traffic in capture files with PySpark; writes Parquet with the "
        "columns of `kafkapy decode`.",
    )
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help="files, directories or glob patterns")
    p.add_argument("--output", "-o", required=True, metavar="DIR", help="Parquet output directory")
    p.add_argument("--master", default="local[*]", type=master_url, help="Spark master (default local[*])")
    p.add_argument("--mode", default="errorifexists", choices=("errorifexists", "overwrite", "append"),
                   help="what to do if DIR exists")  # fmt: skip
    p.add_argument("--verbose", "-v", action="store_true",
                   help="let Spark's own output (JVM notices, log4j, Python warnings) through to stderr")
    add_common_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("kafkapy spark-decode: error: needs pyspark: pip install 'kafkapy[spark]'", file=sys.stderr)
        return 2
    from kafkapy.spark import capture_errors, check_output, expand_paths, summarize, write_captures

    files = expand_paths(args.captures)
    if not files:
        print(f"kafkapy spark-decode: error: no capture files match {args.captures}", file=sys.stderr)
        return 2
    try:
        check_output(args.output, args.mode)
    except (FileExistsError, NotADirectoryError) as exc:
        print(f"kafkapy spark-decode: error: {exc}", file=sys.stderr)
        return 2
    problem = outputs_problem(args, output_is_file=False)
    if problem:
        print(f"kafkapy spark-decode: error: {problem}", file=sys.stderr)
        return 2
    try:
        row_filter(args)  # checked before Spark starts
        keylog_problem(args)
    except (ValueError, ImportError) as exc:
        print(f"kafkapy spark-decode: error: {exc}", file=sys.stderr)
        return 2
    with _quiet(args.verbose) as log_path:
        try:
            spark = _start(args.master, log_path)
        except _SparkFailed as exc:
            print(f"kafkapy spark-decode: {exc}", file=sys.stderr)
            return 1
        try:
            # the tasks write Parquet themselves (see kafkapy.spark.write_captures)
            parts = write_captures(
                spark, files, args.output, mode=args.mode, kafka_ports=kafka_ports(args),
                decode_records=not args.raw_records, bodies=args.bodies, api=args.api, topic=args.topic,
                client_id=args.client_id, errors_only=args.errors_only, tls_keylog=args.tls_keylog,
            )  # fmt: skip
            summary = None
            if args.summary or args.summary_plot:
                summary = summarize(spark.read.parquet(args.output))
        except Exception as exc:  # a failed job: Py4J and PySpark errors carry pages of trace
            where = f" (Spark's log: {log_path})" if log_path else ""
            print(f"kafkapy spark-decode: Spark job failed: {_first_line(str(exc))}{where}", file=sys.stderr)
            return 1
        finally:
            spark.stop()
    if log_path:
        os.remove(log_path)  # nothing failed: the JVM's notices are not worth keeping
    if summary is not None:
        print(summary.table(), file=sys.stderr)
        if args.summary_plot:
            summary.plot(args.summary_plot)
    errors = capture_errors(parts)
    for error in errors:
        print(f"kafkapy spark-decode: {error}", file=sys.stderr)
    count = sum(rows for _, rows in parts)
    print(f"kafkapy spark-decode: {len(files)} captures, {count} rows to {args.output}", file=sys.stderr)
    return 1 if errors else 0


@contextmanager
def _quiet(verbose: bool) -> Iterator[str | None]:
    """Unless verbose: Python warnings off (pyspark's pandas FutureWarning) and the path of a log
    file for the JVM's output. The caller removes the log once all went well; a failure names it."""
    if verbose:
        yield None
        return
    fd, path = tempfile.mkstemp(prefix="kafkapy-spark-", suffix=".log")
    os.close(fd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield path


def _start(master: str, log_path: str | None) -> Any:
    """A SparkSession on ``master``. With a log path, the JVM is started with its stderr on that
    file (it inherits our file descriptor 2, for its whole life and its Python workers')."""
    from pyspark.sql import SparkSession

    # the workers run this interpreter (with kafkapy and pyarrow) unless told otherwise
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("kafkapy spark-decode")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "4")
    )
    if log_path is None:
        try:
            return builder.getOrCreate()
        except Exception as exc:
            raise _SparkFailed(f"cannot start Spark (--master {master}): {_java_reason(None, exc)}") from None
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        return builder.getOrCreate()
    except Exception as exc:
        raise _SparkFailed(f"cannot start Spark (--master {master}): {_java_reason(log_path, exc)} "
                           f"(Spark's log: {log_path})") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _java_reason(log_path: str | None, exc: Exception) -> str:
    """The JVM's own reason for failing (the message of the first Java exception that the
    Python exception quotes or the log shows), or the Python exception's first line."""
    lines = str(exc).splitlines()
    if log_path is not None:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            lines += log.read().splitlines()
    for line in lines:
        match = _JAVA_EXCEPTION.match(line.strip())
        if match:
            return match.group(1)
    return _first_line(str(exc))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "no message"
