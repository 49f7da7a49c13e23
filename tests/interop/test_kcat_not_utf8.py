"""kcat sends its arguments' bytes as they are: a group id, a client id, a topic name and a record
header key that are not UTF-8 reach the broker raw. Kafka reads them as Java does (U+FFFD for
malformed bytes) and serves the requests; so does kafkapy (tests/server/test_strings_not_utf8.py
has the wire detail)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kafkapy.testing import BrokerFactory

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
TIMEOUT_S = 20

pytestmark = pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED (`apt-get install kcat`): "
                                                     "kcat non-UTF-8 interop tests SKIPPED")


def _kcat(*args: bytes | str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    return subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=TIMEOUT_S * 2)


def test_kcat_consumes_in_a_group_whose_id_is_not_utf8(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(group_initial_rebalance_delay_ms=0)
    broker.seed({"t": {"partitions": 1, "records": [{"value": "hello"}]}})
    result = _kcat("-b", broker.bootstrap_servers, "-G", b"group-\xff", "-X", b"client.id=kcat-\xfe",
                   "-X", "auto.offset.reset=earliest", "-c", "1", "-q", "t")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"hello\n"
    group = broker.group("group-\ufffd")
    assert group is not None
    assert [offset.offset for offset in group.offsets] == [1]  # kcat committed as it closed


def test_kcat_lists_a_topic_whose_name_is_not_utf8_as_invalid(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory()
    result = _kcat("-b", broker.bootstrap_servers, "-L", "-t", b"topic-\xff", "-m", str(TIMEOUT_S))
    assert result.returncode == 0, result.stderr
    # the name as the broker read it (the UTF-8 of U+FFFD), refused as Kafka refuses it
    assert b'topic "topic-\xef\xbf\xbd" with 0 partitions: Broker: Invalid topic' in result.stdout


def test_kcat_produces_a_record_header_key_that_is_not_utf8(kafka_broker_factory: BrokerFactory) -> None:
    """Kafka keeps a header's key as the batch holds it (no check of its bytes; a Java consumer's
    Header.key() reads it with U+FFFD), so the batch is taken and stored as sent."""
    broker = kafka_broker_factory()
    broker.seed({"t": {"partitions": 1}})
    produced = _kcat("-b", broker.bootstrap_servers, "-P", "-t", "t", "-H", b"h\xff=v1", "-H", "ok=v2",
                     input=b"hello\n")
    assert produced.returncode == 0, produced.stderr  # was 'Broker failed to validate record'
    [record] = broker.records("t")
    assert (record.value, record.headers) == (b"hello", (("h\ufffd", b"v1"), ("ok", b"v2")))
    consumed = _kcat("-b", broker.bootstrap_servers, "-C", "-t", "t", "-e", "-q", "-f", "%h %s\\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == b"h\xff=v1,ok=v2 hello\n"  # the bytes as produced
