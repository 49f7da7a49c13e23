"""Summaries of decoded rows: requests per API, client and topic, bytes per
topic, latency percentiles; as a text table and as a PNG (matplotlib).

:class:`Summary` accumulates rows one at a time (the local CLI); Spark builds
the same object from aggregates (:func:`kafkapy.spark.summarize`).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["PERCENTILES", "Summary", "is_tls_row", "percentile", "tls_line"]

PERCENTILES = (50.0, 90.0, 99.0, 100.0)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list (non-empty)."""
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def is_tls_row(row: Mapping[str, Any]) -> bool:
    """A row the TLS layer or the framer made for a TLS connection (or direction) not decrypted."""
    return row.get("connection_id") is not None and (row.get("reason") or "").startswith("TLS")


def tls_line(row: Mapping[str, Any]) -> str:
    """The summary's line for such a row: the connection, and why."""
    return f"#{row['connection_id']} {row.get('src')} -> {row.get('dst')}: {row.get('reason')}"


@attrs.define
class Summary:
    rows: int = 0
    status: Counter[str] = attrs.Factory(Counter)
    per_api: Counter[str] = attrs.Factory(Counter)
    per_client: Counter[str] = attrs.Factory(Counter)
    per_topic: Counter[str] = attrs.Factory(Counter)
    bytes_per_topic: Counter[str] = attrs.Factory(Counter)
    # per API name: latency percentiles in ms, filled by finish() or by Spark
    latency: dict[str, dict[float, float]] = attrs.Factory(dict)
    # one line per TLS connection (or direction) not decrypted: which, and why
    tls: list[str] = attrs.Factory(list)
    _latencies: dict[str, list[float]] = attrs.Factory(dict)

    def add(self, row: Mapping[str, Any]) -> None:
        self.rows += 1
        self.status[row["status"]] += 1
        name = row.get("api_name")
        if name is None:
            if is_tls_row(row):
                self.tls.append(tls_line(row))
            return
        self.per_api[name] += 1
        self.per_client[row.get("client_id") or "(none)"] += 1
        topics = row.get("topics") or []
        size = (row.get("request_bytes") or 0) + (row.get("response_bytes") or 0)
        for topic in topics:
            self.per_topic[topic] += 1
            # an exchange naming several topics: its bytes are shared out evenly
            self.bytes_per_topic[topic] += size // len(topics)
        latency = row.get("latency_ms")
        if latency is not None:
            self._latencies.setdefault(name, []).append(latency)

    def add_all(self, rows: Iterable[Mapping[str, Any]]) -> Summary:
        for row in rows:
            self.add(row)
        return self.finish()

    def finish(self) -> Summary:
        everything: list[float] = []
        for name, values in self._latencies.items():
            values.sort()
            everything.extend(values)
            self.latency[name] = {p: percentile(values, p) for p in PERCENTILES}
        if everything:
            everything.sort()
            self.latency["(all)"] = {p: percentile(everything, p) for p in PERCENTILES}
        self._latencies.clear()
        return self

    # --- rendering -----------------------------------------------------------------------

    def table(self, top: int = 20) -> str:
        out: list[str] = [f"{self.rows} rows: " + ", ".join(f"{k} {v}" for k, v in self.status.most_common())]

        def section(title: str, counts: Counter[str], unit: str = "requests") -> None:
            out.append("")
            out.append(f"{title}")
            if not counts:
                out.append("  (none)")
                return
            width = max(len(k) for k, _ in counts.most_common(top))
            for key, value in counts.most_common(top):
                out.append(f"  {key:<{width}}  {value:>12,} {unit if value != 1 else unit[:-1]}")
            if len(counts) > top:
                out.append(f"  ... {len(counts) - top} more")

        if self.tls:
            out.append("")
            out.append("TLS not decrypted")
            out.extend(f"  {line}" for line in self.tls)
        section("requests per API", self.per_api)
        section("requests per client", self.per_client)
        section("requests per topic", self.per_topic)
        section("bytes per topic", self.bytes_per_topic, "bytes")
        out.append("")
        out.append("latency (ms)")
        if not self.latency:
            out.append("  (none)")
        else:
            width = max(len(k) for k in self.latency)
            head = "".join(f"{'p' + format(p, 'g'):>10}" for p in PERCENTILES)
            out.append(f"  {'api':<{width}}{head}")
            for name in sorted(self.latency, key=lambda n: (n == "(all)", n)):
                cells = "".join(f"{self.latency[name][p]:>10.2f}" for p in PERCENTILES)
                out.append(f"  {name:<{width}}{cells}")
        return "\n".join(out)

    def plot(self, path: str | os.PathLike[str], top: int = 15) -> None:
        """Write a PNG with one panel per summary (needs matplotlib: the ``spark`` extra)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 3, figsize=(18, 10))
        panels: list[tuple[str, Counter[str]]] = [
            ("requests per API", self.per_api),
            ("requests per client", self.per_client),
            ("requests per topic", self.per_topic),
            ("bytes per topic", self.bytes_per_topic),
            ("status", self.status),
        ]
        for ax, (title, counts) in zip(axes.flat, panels):
            items = counts.most_common(top)[::-1]
            ax.barh([k[:40] for k, _ in items], [v for _, v in items])
            ax.set_title(title)
        ax = axes.flat[5]
        names = [n for n in sorted(self.latency) if n != "(all)"][:top]
        for i, p in enumerate(PERCENTILES[:-1]):
            ax.barh(
                [y + i * 0.25 for y in range(len(names))],
                [self.latency[n][p] for n in names],
                height=0.25,
                label=f"p{p:g}",
            )
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel("ms")
        ax.set_title("latency percentiles per API")
        if names:
            ax.legend()
        fig.tight_layout()
        fig.savefig(os.fspath(path), format="png")
        plt.close(fig)
