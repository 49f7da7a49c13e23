"""``kafkapy spark-decode 'captures/*.pcap' --output DIR``: decode captures on Spark into Parquet."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkapy.commands.decode import add_common_options, kafka_ports


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "spark-decode",
        help="decode pcap/pcapng captures on Spark, one task per file, into Parquet",
        description="Decode Kafka traffic in capture files with PySpark; writes Parquet with the "
        "columns of `kafkapy decode`.",
    )
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help="files, directories or glob patterns")
    p.add_argument("--output", "-o", required=True, metavar="DIR", help="Parquet output directory")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--mode", default="errorifexists", choices=("errorifexists", "overwrite", "append"),
                   help="what to do if DIR exists")  # fmt: skip
    add_common_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("kafkapy spark-decode needs pyspark: pip install 'kafkapy[spark]'", file=sys.stderr)
        return 2
    from kafkapy.spark import expand_paths, summarize, write_captures

    files = expand_paths(args.captures)
    if not files:
        print(f"kafkapy spark-decode: no capture files match {args.captures}", file=sys.stderr)
        return 2
    import os

    # the workers run this interpreter (with kafkapy and pyarrow) unless told otherwise
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("kafkapy spark-decode")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    try:
        ports, bodies = kafka_ports(args), args.bodies
        # the tasks write Parquet themselves (see kafkapy.spark.write_captures)
        try:
            parts = write_captures(
                spark, files, args.output, mode=args.mode, kafka_ports=ports,
                decode_records=not args.raw_records, bodies=bodies,
            )  # fmt: skip
        except (FileExistsError, NotADirectoryError) as exc:
            print(f"kafkapy spark-decode: {exc}", file=sys.stderr)
            return 2
        count = sum(rows for _, rows in parts)
        print(f"kafkapy spark-decode: {len(files)} captures, {count} rows to {args.output}", file=sys.stderr)
        if args.summary or args.summary_plot:
            summary = summarize(spark.read.parquet(args.output))
            print(summary.table(), file=sys.stderr)
            if args.summary_plot:
                summary.plot(args.summary_plot)
    finally:
        spark.stop()
    return 0
