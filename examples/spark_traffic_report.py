"""A traffic report from packet captures, computed on Spark.

    python examples/spark_traffic_report.py                      # the repository's sample captures
    python examples/spark_traffic_report.py 'captures/*.pcap'   # yours

Each capture file is one Spark task that streams it through kafkapy's decoder
(``kafkapy.spark.read_captures``); the rows are then ordinary Spark columns: here, per API,
how many exchanges, their median and worst latency, and how many answered with an error, plus
the topics written to. Runs Spark in local mode; give it a cluster's master URL through
``SPARK_MASTER`` (the captures must then be at the same path on every executor).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kafkapy.spark import read_captures

SAMPLES = str(Path(__file__).resolve().parents[1] / "tests" / "data" / "captures" / "*.pcap")


def main() -> None:
    paths = sys.argv[1:] or [SAMPLES]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this Python's kafkapy
    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
             .appName("kafkapy traffic report").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        rows = read_captures(spark, paths).cache()  # decoded once, queried three times
        per_api = (rows.where(F.col("api_name").isNotNull())
                   .groupBy("api_name")
                   .agg(F.count("*").alias("exchanges"),
                        F.percentile_approx("latency_ms", 0.5).alias("median_ms"),
                        F.max("latency_ms").alias("max_ms"),
                        F.sum((F.col("error_code") > 0).cast("int")).alias("errors"))
                   .orderBy("api_name"))
        written = (rows.where(F.col("api_name") == "Produce")
                   .select(F.explode("topics").alias("topic")).distinct().orderBy("topic"))
        report = {
            "captures": rows.select("capture").distinct().count(),
            "by_api": {row["api_name"]: {"exchanges": row["exchanges"], "errors": row["errors"] or 0,
                                         "median_ms": row["median_ms"], "max_ms": row["max_ms"]}
                       for row in per_api.collect()},
            "topics_written": [row["topic"] for row in written.collect()],
        }
    finally:
        spark.stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
