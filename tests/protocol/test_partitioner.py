"""The default partitioner for keyed records: Kafka's murmur2 (its own test vectors) and, over any
bytes, equal to kafka-python's port; seeding a keyed record imports no kafka-python, so a user's
test run is spared its import and the schema loader's DeprecationWarnings."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kafkapy.protocol.partitioner import murmur2, partition_for_key

# Kafka's UtilsTest.testMurmur2 (the Java client's values, as signed ints)
JAVA_VECTORS = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
                b"a-little-bit-longer-string": -1486304829,
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}


def test_kafkas_own_vectors() -> None:
    assert {key: murmur2(key) for key in JAVA_VECTORS} == JAVA_VECTORS


@given(st.binary(max_size=200), st.integers(1, 1000))
def test_equal_to_kafka_pythons_murmur2(key: bytes, partitions: int) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF  # it answers unsigned
    assert -(1 << 31) <= murmur2(key) < 1 << 31
    assert partition_for_key(key, partitions) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def test_seeding_keyed_records_imports_no_kafka_python_and_warns_nothing() -> None:
    code = ("import sys, warnings\nwarnings.simplefilter('error')\n"
            "from kafkapy.embedded import Broker\n"
            "with Broker() as broker:\n"
            "    broker.seed({'t': {'partitions': 3, 'records': [{'key': 'k', 'value': 'v'}]}})\n"
            "    [record] = broker.records('t')\n"
            "imported = sorted(m for m in sys.modules if m == 'kafka' or m.startswith('kafka.'))\n"
            "print(record.partition, imported)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(None, 1) == [str(partition_for_key(b"k", 3)), "[]\n"]
