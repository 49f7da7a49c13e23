"""Decoding captured Kafka traffic on Spark (PySpark 4, Arrow throughout).

``read_captures(spark, paths)``
    A DataFrame of decoded exchanges, the columns of
    :data:`kafkapy.capture.rows.COLUMNS`: one Spark task per capture file,
    each streaming its file through kafkapy.capture (memory bounded by open
    connections, not by the file) and handing Arrow batches to Spark.

``write_captures(spark, paths, output)``
    The same rows written straight to Parquet: each task decodes its capture
    and writes one Parquet file with pyarrow, and the driver only hands out
    paths and collects row counts. Nothing passes through the JVM row by
    row, so per core it costs about what the local decoder does.

``decode_request(frame)`` and ``decode_response(frame, api_key, api_version)``
    Arrow UDFs over any DataFrame of binary Kafka frames (the frame without
    its 4-byte size prefix), returning a struct with the header fields, the
    body as JSON and a decode error message (null when it decoded).

The protocol schemas are construct objects compiled at first use; they do not
pickle, so nothing of kafkapy.protocol is shipped with a task. Each Python
worker imports it inside the task, and its module-level caches compile every
(API, version) once per worker process.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kafkapy.capture.filters import RowFilter
from kafkapy.capture.options import body_api_keys, port_numbers
from kafkapy.capture.tcp import DEFAULT_KAFKA_PORTS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "REQUEST_TYPE",
    "RESPONSE_TYPE",
    "ROW_TYPE",
    "capture_errors",
    "check_output",
    "decode_request",
    "decode_response",
    "expand_paths",
    "read_captures",
    "summarize",
    "write_captures",
]

#: Spark DDL of a decoded-exchange row (matches kafkapy.capture.rows.arrow_schema()).
ROW_TYPE = (
    "ts timestamp, src string, dst string, connection_id bigint, api_key int, api_name string, "
    "api_version int, correlation_id int, client_id string, request string, response string, "
    "error_code int, errors array<struct<topic string, topic_id string, partition int, group string, "
    "member string, resource string, code int, name string>>, latency_ms double, request_bytes bigint, "
    "response_bytes bigint, status string, reason string, topics array<string>, capture string"
)
REQUEST_TYPE = (
    "api_key int, api_name string, api_version int, correlation_id int, client_id string, "
    "body string, error string"
)
RESPONSE_TYPE = "correlation_id int, body string, error_code int, error string"

_BATCH_ROWS = 4096


def expand_paths(paths: str | Iterable[str]) -> list[str]:
    """Glob patterns and directories to a sorted list of capture files (on the driver's filesystem)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [os.fspath(paths)]
    out: list[str] = []
    for pattern in paths:
        pattern = pattern.removeprefix("file://")
        if os.path.isdir(pattern):
            names = [os.path.join(pattern, n) for n in os.listdir(pattern)]
            out.extend(n for n in names if n.endswith((".pcap", ".pcapng", ".cap")) and os.path.isfile(n))
            continue
        found = glob.glob(pattern)
        out.extend(found if found else ([pattern] if not glob.has_magic(pattern) else []))
    return sorted(set(out))


def _decode_files(
    batches: Iterator[Any], ports: tuple[int, ...], decode_records: bool, bodies: frozenset[int] | None,
    where: RowFilter, tls_keylog: str | None = None,
) -> Iterator[Any]:
    """mapInArrow body: each input row is a capture path; out come row batches."""
    # Imported here, on the executor: see the module docstring.
    from kafkapy.capture.rows import arrow_schema, decode_capture_batches

    schema = arrow_schema()
    for batch in batches:
        for path in batch.column(0).to_pylist():
            yield from decode_capture_batches(
                path, batch_rows=_BATCH_ROWS, schema=schema, kafka_ports=ports,
                decode_records=decode_records, bodies=bodies, row_filter=where, tls_keylog=tls_keylog,
            )  # fmt: skip


def _checked_keylog(tls_keylog: str | os.PathLike[str] | None) -> str | None:
    """The key log's absolute path for the tasks, once the driver has read it (a KeyLogError, a
    ValueError, if it cannot; an ImportError if ``cryptography`` is missing)."""
    if tls_keylog is None:
        return None
    from kafkapy.capture.rows import open_keylog

    open_keylog(tls_keylog)
    return os.path.abspath(os.fspath(tls_keylog))


def read_captures(
    spark: SparkSession,
    paths: str | Sequence[str],
    *,
    kafka_ports: int | Iterable[int] = DEFAULT_KAFKA_PORTS,
    decode_records: bool = True,
    bodies: Iterable[int | str] | None = None,
    api: Iterable[int | str] | int | str | None = None,
    topic: str | Iterable[str] | None = None,
    client_id: str | Iterable[str] | None = None,
    errors_only: bool = False,
    tls_keylog: str | os.PathLike[str] | None = None,
) -> DataFrame:
    """Decoded exchanges of capture files, one task per file.

    ``bodies``: API keys whose bodies are decoded (None: all; empty:
    header-level rows only), as in :func:`kafkapy.capture.rows.decode_capture`;
    ``api``, ``topic``, ``client_id`` and ``errors_only`` keep only the rows that pass
    them, as there (checked on the driver: a bad value is a ValueError). ``tls_keylog``: the
    clients' NSS key log, which decrypts TLS connections (read on the driver to check it, and by
    each task at the same path, like the captures).

    ``paths``: files, directories or glob patterns, expanded on the driver;
    the files must be readable at the same path by every executor (a local
    run, or a shared mount).
    """
    files = expand_paths(paths)
    if not files:
        raise FileNotFoundError(f"no capture files match {paths!r}")
    ports = port_numbers(kafka_ports)
    keys = body_api_keys(bodies)
    where = RowFilter(api=api, topic=topic, client_id=client_id, errors_only=errors_only)
    keylog = _checked_keylog(tls_keylog)
    files = [os.path.abspath(f) for f in files]
    # parallelize with one slice per file: exactly one file per partition, so one task each
    rdd = spark.sparkContext.parallelize([(f,) for f in files], numSlices=len(files))
    paths_df = spark.createDataFrame(rdd, "path string")

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        return _decode_files(batches, ports, decode_records, keys, where, keylog)

    return paths_df.mapInArrow(decode, ROW_TYPE)


# --- Parquet written by the tasks ---------------------------------------------------------------


def _part_name(path: str) -> str:
    """The Parquet file of one capture: its name plus a digest of its full path, so captures
    with the same name in different directories get different parts, and the same capture
    written again (mode ``append``) replaces its own part."""
    stem = os.path.splitext(os.path.basename(path))[0]
    digest = hashlib.sha1(path.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"part-{stem}-{digest}.parquet"


def _write_files(
    paths: Iterable[str],
    output: str,
    ports: tuple[int, ...],
    decode_records: bool,
    bodies: frozenset[int] | None,
    where: RowFilter,
    tls_keylog: str | None = None,
) -> Iterator[tuple[str, int]]:
    """mapPartitions body: decode each capture into its own Parquet file.

    The file is written under a hidden name (Spark and pyarrow skip names that
    start with ``.``) and renamed when complete, so a failed or retried task
    never leaves a half-written part behind for readers.
    """
    # Imported here, on the executor: see the module docstring.
    import pyarrow.parquet as pq

    from kafkapy.capture.rows import arrow_schema, decode_capture_batches

    schema = arrow_schema()
    for path in paths:
        name = _part_name(path)
        final = os.path.join(output, name)
        partial = os.path.join(output, f".{name}.{os.getpid()}.inprogress")
        rows = 0
        try:
            with pq.ParquetWriter(partial, schema) as writer:
                for batch in decode_capture_batches(
                    path, batch_rows=_PARQUET_BATCH_ROWS, schema=schema, kafka_ports=ports,
                    decode_records=decode_records, bodies=bodies, row_filter=where, tls_keylog=tls_keylog,
                ):  # fmt: skip
                    writer.write_batch(batch)
                    rows += batch.num_rows
            os.replace(partial, final)
        finally:
            if os.path.exists(partial):
                os.remove(partial)
        yield final, rows


#: Rows per Parquet row group written by a task (pyarrow's writer keeps one group in memory).
_PARQUET_BATCH_ROWS = 8192


def check_output(output: str | os.PathLike[str], mode: str = "errorifexists") -> str:
    """The absolute output directory, if ``mode`` allows writing there; else FileExistsError,
    NotADirectoryError or ValueError. Needs no Spark, so a command checks before starting one."""
    out = os.path.abspath(os.fspath(output).removeprefix("file://"))
    if mode not in ("errorifexists", "error", "overwrite", "append"):
        raise ValueError(f"unknown save mode {mode!r}: errorifexists, overwrite or append")
    if os.path.exists(out) and not os.path.isdir(out):
        # Never delete a user's file in the name of "overwrite": the output is a directory of parts.
        raise NotADirectoryError(f"{out} is a file, not an output directory")
    if os.path.exists(out) and mode in ("errorifexists", "error"):
        raise FileExistsError(f"{out} already exists (mode 'overwrite' or 'append' to write anyway)")
    return out


def capture_errors(parts: Iterable[tuple[str, int]]) -> list[str]:
    """``capture: reason`` for each capture that could not be read to its end (the rows with no
    API key, no connection and status ``undecodable``: not a capture, cut short, unreadable),
    read from the Parquet parts :func:`write_captures` returned, in their order: what
    ``kafkapy decode`` reports on stderr."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    errors: list[str] = []
    for part, _ in parts:
        table = pq.read_table(part, columns=["api_key", "connection_id", "status", "reason", "capture"])
        file_level = pc.and_(pc.is_null(table["api_key"]), pc.is_null(table["connection_id"]))
        failed = table.filter(pc.and_(file_level, pc.equal(table["status"], "undecodable")))
        errors.extend(f"{row['capture']}: {row['reason']}" for row in failed.to_pylist())
    return errors


def write_captures(
    spark: SparkSession,
    paths: str | Sequence[str],
    output: str | os.PathLike[str],
    *,
    mode: str = "errorifexists",
    kafka_ports: int | Iterable[int] = DEFAULT_KAFKA_PORTS,
    decode_records: bool = True,
    bodies: Iterable[int | str] | None = None,
    api: Iterable[int | str] | int | str | None = None,
    topic: str | Iterable[str] | None = None,
    client_id: str | Iterable[str] | None = None,
    errors_only: bool = False,
    tls_keylog: str | os.PathLike[str] | None = None,
) -> list[tuple[str, int]]:
    """Decode captures into a Parquet directory, one task and one file per capture.

    Returns ``(parquet file, rows)`` per capture, in the order of the expanded
    paths. ``mode`` is Spark's: ``errorifexists``, ``overwrite`` (the
    directory is removed first) or ``append`` (existing parts are kept; a
    capture written again replaces its own part). As with
    :func:`read_captures`, captures and ``output`` must be reachable at the
    same paths from every executor; the result reads back with
    ``spark.read.parquet(output)`` as the rows of :func:`read_captures`. The filters
    (``api``, ...) are :func:`read_captures`' own.
    """
    files = [os.path.abspath(f) for f in expand_paths(paths)]
    if not files:
        raise FileNotFoundError(f"no capture files match {paths!r}")
    ports = port_numbers(kafka_ports)  # before anything is removed or made
    keys = body_api_keys(bodies)
    where = RowFilter(api=api, topic=topic, client_id=client_id, errors_only=errors_only)
    keylog = _checked_keylog(tls_keylog)
    out = check_output(output, mode)
    if os.path.exists(out) and mode == "overwrite":
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)
    success = os.path.join(out, "_SUCCESS")
    if os.path.exists(success):
        os.remove(success)

    def task(part: Iterable[str]) -> Iterator[tuple[str, int]]:
        return _write_files(part, out, ports, decode_records, keys, where, keylog)

    # one slice per file: exactly one file per partition, so one task each
    rdd = spark.sparkContext.parallelize(files, numSlices=len(files))
    written: list[tuple[str, int]] = rdd.mapPartitions(task).collect()
    with open(success, "w"):
        pass  # the marker Spark's own writers leave when a job completes
    return written


# --- UDFs over binary frames -------------------------------------------------------------------


def _request_struct(frames: Any) -> Any:
    import pyarrow as pa

    from kafkapy.errors import DecodeError
    from kafkapy.protocol import api_name, decode_request_header
    from kafkapy.protocol import decode_request_json as decode  # the body's JSON, no Body built

    cols: dict[str, list[Any]] = {n: [] for n in
                                  ("api_key", "api_name", "api_version", "correlation_id", "client_id",
                                   "body", "error")}  # fmt: skip
    for frame in frames.to_pylist():
        key = version = corr = client = body = error = None
        if frame is None:
            error = "null frame"
        else:
            try:
                header = decode_request_header(frame)
                key, version, corr, client = (
                    header.api_key, header.api_version, header.correlation_id, header.client_id
                )
                body = decode(frame).body.text
            except DecodeError as exc:
                error = str(exc)
        cols["api_key"].append(key)
        cols["api_name"].append(api_name(key) if key is not None else None)
        cols["api_version"].append(version)
        cols["correlation_id"].append(corr)
        cols["client_id"].append(client)
        cols["body"].append(body)
        cols["error"].append(error)
    types = {"api_key": pa.int32(), "api_name": pa.string(), "api_version": pa.int32(),
             "correlation_id": pa.int32(), "client_id": pa.string(), "body": pa.string(),
             "error": pa.string()}  # fmt: skip
    return pa.StructArray.from_arrays(
        [pa.array(v, type=types[k]) for k, v in cols.items()], names=list(cols)
    )


def _response_struct(frames: Any, api_keys: Any, api_versions: Any) -> Any:
    import pyarrow as pa

    from kafkapy.errors import DecodeError
    from kafkapy.protocol import decode_response_json as decode  # the body's JSON, no Body built

    corrs: list[int | None] = []
    bodies: list[str | None] = []
    codes: list[int | None] = []
    errors: list[str | None] = []
    for frame, key, version in zip(frames.to_pylist(), api_keys.to_pylist(), api_versions.to_pylist()):
        corr = body = code = error = None
        if frame is None or key is None or version is None:
            error = "null frame, api_key or api_version"
        else:
            if len(frame) >= 4:
                corr = int.from_bytes(frame[:4], "big", signed=True)
            try:
                rendered = decode(frame, key, version).body
                body, code = rendered.text, rendered.error_code
            except DecodeError as exc:
                error = str(exc)
        corrs.append(corr)
        bodies.append(body)
        codes.append(code)
        errors.append(error)
    return pa.StructArray.from_arrays(
        [pa.array(corrs, pa.int32()), pa.array(bodies, pa.string()), pa.array(codes, pa.int32()),
         pa.array(errors, pa.string())],
        names=["correlation_id", "body", "error_code", "error"],
    )  # fmt: skip


def _arrow_udf() -> tuple[Any, Any]:
    """pyspark.sql.functions.arrow_udf (PySpark 4.1+), looked up at run time: its stubs lag."""
    import importlib

    functions = importlib.import_module("pyspark.sql.functions")
    return functions.arrow_udf, functions.ArrowUDFType.SCALAR


def decode_request(frame: Column | str) -> Column:
    """Column of request structs (REQUEST_TYPE) from a column of binary request frames."""
    arrow_udf, scalar = _arrow_udf()

    with warnings.catch_warnings():  # "prefer type hints": these functions import pyarrow lazily
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(_request_struct, REQUEST_TYPE, scalar)
    return udf(frame)  # type: ignore[no-any-return]


def decode_response(frame: Column | str, api_key: Column | str, api_version: Column | str) -> Column:
    """Column of response structs (RESPONSE_TYPE): each frame decoded at its row's API key and version."""
    arrow_udf, scalar = _arrow_udf()

    with warnings.catch_warnings():  # "prefer type hints": these functions import pyarrow lazily
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(_response_struct, RESPONSE_TYPE, scalar)
    return udf(frame, api_key, api_version)  # type: ignore[no-any-return]


# --- summaries -------------------------------------------------------------------------------


def summarize(df: DataFrame) -> Any:
    """A kafkapy.capture.summary.Summary computed with Spark aggregates (only the results are collected)."""
    from collections import Counter

    from pyspark.sql import functions as F

    from kafkapy.capture.summary import PERCENTILES, Summary, is_tls_row, tls_line

    s = Summary()
    s.rows = df.count()
    s.status = Counter({r["status"]: r["count"] for r in df.groupBy("status").count().collect()})
    named = df.where(F.col("api_name").isNotNull())
    s.per_api = Counter({r["api_name"]: r["count"] for r in named.groupBy("api_name").count().collect()})
    clients = named.select(F.coalesce("client_id", F.lit("(none)")).alias("c")).groupBy("c").count()
    s.per_client = Counter({r["c"]: r["count"] for r in clients.collect()})
    exploded = named.select(
        F.explode("topics").alias("topic"),
        (
            (F.coalesce("request_bytes", F.lit(0)) + F.coalesce("response_bytes", F.lit(0)))
            / F.greatest(F.size("topics"), F.lit(1))
        ).cast("long").alias("b"),
    )
    for r in exploded.groupBy("topic").agg(F.count("*").alias("n"), F.sum("b").alias("b")).collect():
        s.per_topic[r["topic"]] = r["n"]
        s.bytes_per_topic[r["topic"]] = int(r["b"] or 0)
    fractions = [p / 100.0 for p in PERCENTILES]
    lat = named.where(F.col("latency_ms").isNotNull())
    for r in lat.groupBy("api_name").agg(F.percentile("latency_ms", fractions).alias("p")).collect():
        s.latency[r["api_name"]] = dict(zip(PERCENTILES, r["p"]))
    total = lat.agg(F.percentile("latency_ms", fractions).alias("p")).collect()
    if total and total[0]["p"] is not None:
        s.latency["(all)"] = dict(zip(PERCENTILES, total[0]["p"]))
    # a few rows: one per TLS connection (or direction) not decrypted
    tls = df.where(F.col("api_name").isNull() & F.col("connection_id").isNotNull()
                   & F.col("reason").startswith("TLS"))
    columns = ("capture", "connection_id", "src", "dst", "reason")
    rows = [r.asDict() for r in tls.select(*columns).orderBy("capture", "connection_id").collect()]
    s.tls = [tls_line(row) for row in rows if is_tls_row(row)]
    return s
