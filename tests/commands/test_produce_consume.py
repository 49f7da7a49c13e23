"""`kafkapy produce`, `kafkapy consume` and `kafkapy topics` against librdkafka's mock cluster,
checked against confluent-kafka and kcat as independent readers and writers."""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from records_cli import TIMEOUT_S, MockCluster, json_lines, kafkapy

from kafkapy.commands.consume import _offset_argument, render_bytes
from kafkapy.commands.produce import messages, split, unescape

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def mock() -> Iterator[MockCluster]:
    cluster = MockCluster()
    yield cluster
    cluster.close()


_topics = iter(range(1_000_000))


def new_topic() -> str:
    return f"cli-{os.getpid()}-{next(_topics)}"


# --- produce, read back by confluent-kafka --------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_produce_keys_nulls_headers_each_codec(mock: MockCluster, codec: str) -> None:
    topic = new_topic()
    lines = b"k1:v1\nk2:\n:v3\nno key here\n\xff\xfe:\x00\x01\n"
    result = kafkapy("produce", "-b", mock.bootstrap, "-t", topic, "-p", "2", "-K", ":", "-Z",
                     "-H", "h1=x", "-H", "h2=", "-z", codec, stdin=lines)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == b""
    read = mock.read_all(topic, 2)
    assert [(m.key(), m.value()) for m in read] == [
        (b"k1", b"v1"), (b"k2", None), (None, b"v3"), (None, b"no key here"), (b"\xff\xfe", b"\x00\x01")]
    assert all(m.headers() == [("h1", b"x"), ("h2", b"")] for m in read)
    assert [m.offset() for m in read] == [0, 1, 2, 3, 4]


def test_produce_without_null_flag_keeps_empty_bytes(mock: MockCluster) -> None:
    topic = new_topic()
    result = kafkapy("produce", "-b", mock.bootstrap, "-t", topic, "-p", "0", "-K", ":",
                     "-D", "\\t", stdin=b"k:\t:v\tlast-without-delimiter")
    assert result.returncode == 0, result.stderr.decode()
    assert [(m.key(), m.value()) for m in mock.read_all(topic, 0)] == [
        (b"k", b""), (b"", b"v"), (None, b"last-without-delimiter")]


def test_produce_partitions_keys_as_the_java_client(mock: MockCluster) -> None:
    """Keyed records without -p land where librdkafka's murmur2 partitioner (the Java default) puts them."""
    ours, theirs = new_topic(), new_topic()
    keys = [f"key-{i}".encode() for i in range(40)]
    result = kafkapy("produce", "-b", mock.bootstrap, "-t", ours, "-K", "=",
                     stdin=b"".join(k + b"=v\n" for k in keys))
    assert result.returncode == 0, result.stderr.decode()
    mock.write(theirs, [{"key": k, "value": b"v"} for k in keys], partitioner="murmur2")
    placed = {p: sorted(m.key() for m in mock.read_all(ours, p)) for p in range(4)}
    assert placed == {p: sorted(m.key() for m in mock.read_all(theirs, p)) for p in range(4)}
    assert sum(map(len, placed.values())) == len(keys)
    assert sum(1 for keys_here in placed.values() if keys_here) > 1


# --- consume what confluent-kafka wrote -------------------------------------------------------

def test_consume_json_of_an_independent_writer(mock: MockCluster) -> None:
    topic = new_topic()
    mock.write(topic, [
        {"key": b"a", "value": b"text", "partition": 1, "headers": [("h", b"v"), ("bin", b"\x80")],
         "timestamp": 1_700_000_000_000},
        {"key": None, "value": None, "partition": 1, "timestamp": 1_700_000_000_001},
        {"key": b"\xc3\x28", "value": "ünïcode".encode(), "partition": 1, "timestamp": 1_700_000_000_002},
    ], **{"compression.type": "zstd"})
    records = json_lines(kafkapy("consume", "-b", mock.bootstrap, "-t", topic, "-e", "--format", "json"))
    assert records == [
        {"topic": topic, "partition": 1, "offset": 0, "timestamp": 1_700_000_000_000, "key": "a",
         "value": "text", "headers": [{"key": "h", "value": "v"},
                                      {"key": "bin", "value": {"base64": "gA=="}}]},
        {"topic": topic, "partition": 1, "offset": 1, "timestamp": 1_700_000_000_001, "key": None,
         "value": None, "headers": []},
        {"topic": topic, "partition": 1, "offset": 2, "timestamp": 1_700_000_000_002,
         "key": {"base64": "wyg="}, "value": "ünïcode", "headers": []},
    ]


def test_consume_text_with_key_delimiter_and_null_text(mock: MockCluster) -> None:
    topic = new_topic()
    mock.write(topic, [{"key": b"k", "value": None, "partition": 0},
                       {"key": None, "value": b"v", "partition": 0}])
    result = kafkapy("consume", "-b", mock.bootstrap, "-t", topic, "-p", "0", "-e", "-K", "|", "-Z")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == b"k|NULL\nNULL|v\n"
    plain = kafkapy("consume", "-b", mock.bootstrap, "-t", topic, "-p", "0", "-e", "-D", "\\0")
    assert plain.stdout == b"\x00v\x00"


def test_consume_offsets_and_count(mock: MockCluster) -> None:
    topic = new_topic()
    now = int(time.time() * 1000)
    mock.write(topic, [{"value": str(i).encode(), "partition": 3, "timestamp": now + i} for i in range(10)])

    def values(*args: str) -> list[str]:
        found = json_lines(kafkapy("consume", "-b", mock.bootstrap, "-t", topic, "-p", "3", "-J", *args))
        return [r["value"] for r in found]

    assert values("-e") == [str(i) for i in range(10)]
    assert values("-o", "beginning", "-c", "3") == ["0", "1", "2"]
    assert values("-o", "7", "-e") == ["7", "8", "9"]
    assert values("-o", "-2", "-e") == ["8", "9"]
    assert values("-o", "-50", "-e") == [str(i) for i in range(10)]  # not before the start
    assert values("-o", "end", "-e") == []
    # s@MS is tested against kafkapy's broker: librdkafka's mock answers every timestamp with -1.
    assert values("-o", "4", "-c", "2") == ["4", "5"]  # -c alone stops (no -e needed)


def test_consume_follows_until_count_reached(mock: MockCluster) -> None:
    """Without -e the command waits for records produced after it started."""
    topic = new_topic()
    mock.write(topic, [{"value": b"first", "partition": 0}])
    follower = subprocess.Popen(
        [sys.executable, "-m", "kafkapy.cli", "consume", "-b", mock.bootstrap,
         "-t", topic, "-p", "0", "-c", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        assert follower.poll() is None, "exited before the second record existed"
        mock.write(topic, [{"value": b"second", "partition": 0}])
        out, err = follower.communicate(timeout=TIMEOUT_S)
    finally:
        if follower.poll() is None:  # the test failed: it is waited for and its pipes closed
            follower.kill()
            follower.communicate(timeout=TIMEOUT_S)
    assert follower.returncode == 0, err.decode()
    assert out == b"first\nsecond\n"


def test_topics_describe_shows_offsets(mock: MockCluster) -> None:
    topic = new_topic()
    mock.write(topic, [{"value": b"x", "partition": 1}] * 3 + [{"value": b"y", "partition": 2}])
    result = kafkapy("topics", "-b", mock.bootstrap, "--describe", "--topic", topic, "--json")
    assert result.returncode == 0, result.stderr.decode()
    (described,) = json.loads(result.stdout)["topics"]
    assert described["topic"] == topic
    assert [(p["partition"], p["earliest_offset"], p["latest_offset"]) for p in described["partitions"]] == [
        (0, 0, 0), (1, 0, 3), (2, 0, 1), (3, 0, 0)]
    assert all(p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1] for p in described["partitions"])
    table = kafkapy("topics", "-b", mock.bootstrap, "--describe", "--topic", topic).stdout.decode()
    assert table.splitlines()[0].split() == ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR",
                                             "EARLIEST", "LATEST", "ERROR"]
    assert table.splitlines()[2].split() == [topic, "1", "1", "0", "1", "1", "0", "3", "-"]
    listed = kafkapy("topics", "-b", mock.bootstrap, "--list")
    assert topic in listed.stdout.decode().split()


# --- kcat, the tool these commands imitate, on the other side --------------------------------

needs_kcat = pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED: kcat interop tests SKIPPED")


@needs_kcat
def test_kcat_reads_what_kafkapy_produced(mock: MockCluster) -> None:
    assert KCAT is not None
    topic = new_topic()
    result = kafkapy("produce", "-b", mock.bootstrap, "-t", topic, "-p", "0", "-K", ":", "-z", "snappy",
                     stdin=b"a:1\nb:2\n")
    assert result.returncode == 0, result.stderr.decode()
    read = subprocess.run([KCAT, "-C", "-b", mock.bootstrap, "-t", topic, "-p", "0", "-e", "-J"],
                          capture_output=True, timeout=TIMEOUT_S)
    assert read.returncode == 0, read.stderr.decode()
    assert [(r["key"], r["payload"], r["offset"]) for r in map(json.loads, read.stdout.splitlines())] == [
        ("a", "1", 0), ("b", "2", 1)]


@needs_kcat
def test_kafkapy_reads_what_kcat_produced(mock: MockCluster) -> None:
    assert KCAT is not None
    topic = new_topic()
    wrote = subprocess.run([KCAT, "-P", "-b", mock.bootstrap, "-t", topic, "-p", "1", "-K", ":",
                            "-H", "src=kcat", "-z", "gzip"], input=b"x:one\ny:two\n", capture_output=True,
                           timeout=TIMEOUT_S)
    assert wrote.returncode == 0, wrote.stderr.decode()
    records = json_lines(kafkapy("consume", "-b", mock.bootstrap, "-t", topic, "-p", "1", "-e", "-J"))
    assert [(r["key"], r["value"], r["headers"]) for r in records] == [
        ("x", "one", [{"key": "src", "value": "kcat"}]), ("y", "two", [{"key": "src", "value": "kcat"}])]


# --- errors: one line, exit 2 for usage and 1 at run time ------------------------------------

@pytest.mark.parametrize("args", [
    ["consume", "-b", "127.0.0.1:9", "-t", "t", "-o", "yesterday"],
    ["consume", "-b", "127.0.0.1:9", "-t", "t", "--format", "xml"],
    ["produce", "-b", "127.0.0.1:9", "-t", "t", "-z", "brotli"],
    ["produce", "-b", "nowhere", "-t", "t"],
    ["produce", "-b", "127.0.0.1:9"],
    ["topics", "-b", "127.0.0.1:9"],
])
def test_usage_errors_exit_2_in_one_line(args: list[str]) -> None:
    result = kafkapy(*args)
    assert result.returncode == 2
    assert len(result.stderr.decode().strip().splitlines()) == 1


def test_usage_errors_found_after_connecting_exit_2(mock: MockCluster) -> None:
    topic = new_topic()
    for args in (["produce", "-t", topic, "-p", "9"], ["consume", "-t", topic, "-p", "4", "-e"],
                 ["produce", "-t", topic, "-H", "no-equals-sign"]):
        result = kafkapy(*args, "-b", mock.bootstrap, stdin=b"v\n")
        assert result.returncode == 2, args
        assert len(result.stderr.decode().strip().splitlines()) == 1, result.stderr


def test_runtime_errors_exit_1_in_one_line(mock: MockCluster) -> None:
    refused = kafkapy("consume", "-b", "127.0.0.1:1", "-t", "t", "-e")
    assert refused.returncode == 1
    assert refused.stderr.decode().strip().splitlines() == [
        "kafkapy consume: cannot connect to 127.0.0.1:1: Connection refused"]
    missing = kafkapy("topics", "-b", mock.bootstrap, "--describe", "--topic", "no-such-topic")
    assert missing.returncode == 1
    assert missing.stderr.decode().strip() == \
        "kafkapy topics: Topic 'no-such-topic' does not exist as expected"
    # A consumer that waited for the topic would wait --timeout (60 s) for its leader; one that
    # does not answers at once, however long a loaded machine takes to start the process.
    started = time.monotonic()
    unknown = kafkapy("consume", "-b", mock.bootstrap, "-t", "never-made", "-e", "--timeout", "60",
                      timeout=90)
    assert unknown.returncode == 1
    assert unknown.stderr.decode().strip() == (
        "kafkapy consume: topic 'never-made': UNKNOWN_TOPIC_OR_PARTITION")
    assert time.monotonic() - started < 30, "a consumer does not create topics: nothing to wait for"
    topic = new_topic()
    mock.write(topic, [{"value": b"v", "partition": 0}])
    beyond = kafkapy("consume", "-b", mock.bootstrap, "-t", topic, "-p", "0", "-o", "5", "-e")
    assert beyond.returncode == 1
    assert beyond.stderr.decode().strip().splitlines() == [
        f"kafkapy consume: fetch {topic}-0 at offset 5: OFFSET_OUT_OF_RANGE"]


# --- the pure parts -------------------------------------------------------------------------

@given(st.binary())
def test_render_bytes_is_lossless(data: bytes) -> None:
    shown = render_bytes(data)
    back = json.loads(json.dumps(shown))
    if isinstance(back, str):
        assert back.encode("utf-8") == data
    else:
        assert base64.b64decode(back["base64"]) == data


def test_render_bytes_null_text_binary() -> None:
    assert render_bytes(None) is None
    assert render_bytes(b"caf\xc3\xa9") == "café"
    assert render_bytes(b"\xff") == {"base64": "/w=="}


@given(st.lists(st.binary().filter(lambda b: b"\n" not in b)), st.integers(1, 7))
def test_messages_split_any_chunking(parts: list[bytes], chunk: int) -> None:
    """The messages do not depend on how the input arrives in reads."""
    data = b"".join(p + b"\n" for p in parts)
    chunks = iter([data[start:start + chunk] for start in range(0, len(data), chunk)])
    found = [m for batch in messages(lambda _: next(chunks, b""), b"\n") for m in batch]
    assert found == parts


@given(st.integers(-(1 << 63) + 1, (1 << 63) - 1))
def test_offset_forms(number: int) -> None:
    assert _offset_argument(str(number)) == (("relative", -number) if number < 0 else ("absolute", number))
    assert _offset_argument(f"s@{number}") == ("timestamp", number)


# Past a long (the last two): an EncodeError traceback from the ListOffsets request before.
@pytest.mark.parametrize("text", ["", "begin", "s@", "s@x", "1.5", "--1", "end2",
                                  str(1 << 63), f"s@{1 << 63}"])
def test_offset_forms_rejected(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        _offset_argument(text)


def test_split_and_unescape() -> None:
    assert split(b"k:v:w", b":", False) == (b"k", b"v:w")
    assert split(b"v", b":", False) == (None, b"v")
    assert split(b":", b":", False) == (b"", b"")
    assert split(b":", b":", True) == (None, None)
    assert split(b"", None, True) == (None, None)
    assert unescape("\\t|\\n\\0\\\\x") == b"\t|\n\x00\\x"
