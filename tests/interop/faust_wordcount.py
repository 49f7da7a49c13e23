"""A Faust (faust-streaming) word count, run as a worker process by tests/interop/test_faust.py.

Usage: faust_wordcount.py BOOTSTRAP GUARANTEE COMMIT_INTERVAL_S DATADIR ROUTE

Words arrive on "words" (two partitions). ROUTE "group_by": the agent repartitions them by word
(through an internal topic); "keyed": they arrive keyed by word, so no repartition is needed. It
counts them in a table (its changelog topic, read back when a worker starts) and sends
{"w": word, "n": count} to "counts". With GUARANTEE exactly_once, Faust keeps one transactional
producer per partition and commits offsets, changelog and output together every COMMIT_INTERVAL_S
(and its consumer reads read_committed, so a repartitioned word reaches the count only then).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import faust

GROUP = "wordcount"
CLIENT_ID = "wordcount-worker"

bootstrap, guarantee, commit_interval, datadir, route = sys.argv[1:6]
app = faust.App(GROUP, broker=f"kafka://{bootstrap}", store="memory://", datadir=datadir,
                processing_guarantee=guarantee, broker_commit_interval=float(commit_interval),
                broker_client_id=CLIENT_ID, topic_partitions=2, web_enabled=False)
words = app.topic("words", value_type=bytes, value_serializer="raw")
counts_out = app.topic("counts", value_serializer="json")
counts = app.Table("word-counts", default=int, partitions=2)


@app.agent(words)
async def count(stream: AsyncIterator[bytes]) -> None:
    source = stream.group_by(lambda w: w, name="byword") if route == "group_by" else stream  # type: ignore[attr-defined]
    async for word in source:
        text = word.decode() if isinstance(word, bytes) else str(word)
        counts[text] += 1
        await counts_out.send(key=text.encode(), value={"w": text, "n": counts[text]})


if __name__ == "__main__":
    sys.argv = [sys.argv[0], "worker", "--loglevel", "info", "--without-web"]
    app.main()
