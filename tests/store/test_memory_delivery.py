"""MemoryStore's delivery of watch news: one callback at a time, in the order of the changes, even when
a callback itself writes or a watch is cancelled while its news waits (the contract suite covers
racing writers for both stores)."""

from __future__ import annotations

from typing import Any

from kafkapy.store import MemoryStore


def test_a_callback_that_writes_sees_its_news_after_the_news_it_is_handling() -> None:
    store = MemoryStore()
    seen: list[list[str]] = []
    seen_when_the_write_returned: list[list[str]] = []

    def first(topics: dict[str, Any]) -> None:
        seen.append(sorted(topics))
        if list(topics) == ["a"]:  # a reaction that writes, as a controller creating a topic would
            store.create_topic("b", {0: (1,)})
            seen_when_the_write_returned.extend(seen)

    second: list[list[str]] = []
    store.watch_topics(first)
    store.watch_topics(lambda topics: second.append(sorted(topics)))
    store.create_topic("a", {0: (1,)})
    assert seen == [[], ["a"], ["a", "b"]]
    # The news of "a" was still being handed out, so "b"'s waited for it, for every watch.
    assert seen_when_the_write_returned == [[], ["a"]]
    assert second == [[], ["a"], ["a", "b"]]  # never "b" before "a"


def test_a_watch_cancelled_while_its_news_waits_is_not_called() -> None:
    store = MemoryStore()
    late: list[list[str]] = []
    watches: list[Any] = []

    def cancel_the_other(topics: dict[str, Any]) -> None:
        if topics:
            watches[1].cancel()

    watches.append(store.watch_topics(cancel_the_other))
    watches.append(store.watch_topics(lambda topics: late.append(sorted(topics))))
    store.create_topic("a", {0: (1,)})
    assert late == [[]]  # the initial state only: "a" was queued for it, then it was cancelled


def test_the_first_state_of_a_watch_set_inside_a_callback_follows_the_news_before_it() -> None:
    store = MemoryStore()
    inner: list[list[str]] = []

    def outer(topics: dict[str, Any]) -> None:
        if list(topics) == ["a"]:
            store.create_topic("b", {0: (1,)})
            store.watch_topics(lambda found: inner.append(sorted(found)))

    store.watch_topics(outer)
    store.create_topic("a", {0: (1,)})
    # Set after "b" was made: its first state has "b", and no older state follows it.
    assert inner == [["a", "b"]]
