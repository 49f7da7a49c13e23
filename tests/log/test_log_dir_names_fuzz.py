"""Fuzzing what a log dir holds that kafkapy did not write: directory names and the partition.metadata
and meta.properties files. The survey and the log loading read any of them, leaving what is not a
partition, refusing another broker's dir (MetaPropertiesMismatch) and naming a file they cannot read,
never failing with another exception."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkapy.log.checkpoint import CheckpointCorrupt
from kafkapy.log.manager import (
    META_PROPERTIES,
    AllLogDirsFailed,
    LogManager,
    MetaPropertiesMismatch,
    parse_partition_dir,
    stored_broker_id,
)
from kafkapy.log.moves import parse_moved_dir
from kafkapy.log.partition_metadata import (
    PARTITION_METADATA,
    encode_partition_metadata,
    read_partition_metadata,
)
from kafkapy.log.survey import survey_log_dirs

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Names built from the parts Kafka's names have (a topic, '-', a partition number, a move's tag and
# suffix), the numbers also in other scripts' digits (Java's Integer.parseInt reads the decimal ones).
_PART = st.sampled_from(["t", "my-topic", "a.b", "-", ".", "0", "12", "²", "٣", "¼", "x" * 3, "delete",
                         "future", "stray", "0123456789abcdef0123456789abcdef"])
_NUMBER = st.lists(st.sampled_from(["0", "7", "²", "٣", "¼", "x"]), min_size=1, max_size=2).map("".join)
_SUFFIX = st.sampled_from(["", ".0123456789abcdef0123456789abcdef-future", ".abc-delete", "-stray"])
_NAMES = (st.builds(lambda topic, number, suffix: f"{topic}-{number}{suffix}", _PART, _NUMBER, _SUFFIX)
          | st.lists(_PART, min_size=1, max_size=5).map("".join)).filter(lambda n: n not in (".", ".."))


@given(st.text(max_size=30) | _NAMES)
def test_a_directory_name_is_a_partition_or_none(name: str) -> None:
    found = parse_partition_dir(name)
    if found is not None:
        assert found[1] >= 0 and name == f"{found[0]}-{name.rpartition('-')[2]}"
    moved = parse_moved_dir(name)
    if moved is not None:
        assert moved[1] >= 0


_LINES = st.sampled_from(["version: 0", "version: 1", "version: -1", "version: ²",
                          "topic_id: AAAAAAAAAAAAAAAAAAAAAA", "topic_id: é", "topic_id: ==", "topic_id:",
                          "", " ", "broker.id=1", "broker.id=2", "broker.id=1\x1f",
                          "cluster.id=c", "node.id=²", "#", "="])
_FILE = (st.lists(_LINES | st.text(max_size=12), max_size=4).map(lambda lines: "\n".join(lines).encode())
         | st.binary(max_size=40)
         | st.uuids().map(lambda u: encode_partition_metadata(u).encode()))


@given(_FILE)
def test_partition_metadata_is_an_id_none_or_corrupt(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / PARTITION_METADATA).write_bytes(content)
        try:
            read_partition_metadata(Path(directory))
        except CheckpointCorrupt as refused:
            assert str(refused)


@given(_FILE)
@example(b"broker.id=7\x1f\n")  # blank to str.strip, not to int()
def test_the_broker_id_a_meta_properties_holds_is_an_int_or_none(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / META_PROPERTIES).write_bytes(content)
        found = stored_broker_id([directory])
        assert found is None or isinstance(found, int)


@FUZZ
@given(names=st.lists(_NAMES, max_size=4, unique=True), metadata=st.none() | _FILE, meta=st.none() | _FILE,
       files=st.lists(st.builds(lambda number, suffix: number + suffix, _NUMBER | st.just("0" * 20),
                                st.sampled_from([".log", ".index", ".snapshot", ".log.deleted", ""])),
                      max_size=3, unique=True))
def test_any_log_dir_is_surveyed_and_loaded_without_a_traceback(
        names: list[str], metadata: bytes | None, meta: bytes | None, files: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        log_dir = Path(directory)
        for name in names:
            (log_dir / name).mkdir()
            if metadata is not None:
                (log_dir / name / PARTITION_METADATA).write_bytes(metadata)
            for file in files:  # a segment's files, or what only looks like one
                (log_dir / name / file).write_bytes(b"")
        if meta is not None:
            (log_dir / META_PROPERTIES).write_bytes(meta)
        try:
            survey = survey_log_dirs([log_dir], 1, "c")
        except MetaPropertiesMismatch:
            return
        assert all(line.strip() and "\n" not in line for line in survey.left)
        assert all(parse_partition_dir(f.directory.name) or parse_moved_dir(f.directory.name)
                   for f in survey.partitions)
        try:
            LogManager([log_dir], broker_id=1, cluster_id="c").close()
        except (AllLogDirsFailed, CheckpointCorrupt) as refused:  # the start refused, naming the file
            assert "\n" not in str(refused) and str(log_dir) in str(refused)
        except ValueError as refused:  # t-0 and t-00 are one partition to Kafka too: it refuses both
            assert re.search("is in two log dirs|has two future directories", str(refused)), refused
