"""Hypothesis: random Produce requests mixing valid and damaged batches over several partitions,
against a model of what each partition should hold. A damaged batch is never stored, every
acknowledged batch is there at the offsets it was given, and one partition's damage never
changes another's answer."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import RecordBatch, build_record_batch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

PARTITIONS = 3
_topics = itertools.count()

# What a damage does to a valid batch, and the error Kafka answers it with.
DAMAGES = {
    "crc": ErrorCode.CORRUPT_MESSAGE,  # a byte flipped inside the CRC-covered range
    "magic": ErrorCode.CORRUPT_MESSAGE,  # magic 7
    "base-offset": ErrorCode.INVALID_RECORD,  # a client batch must start at offset 0
    "empty": ErrorCode.INVALID_RECORD,  # no whole batch
}


def damage(data: bytes, how: str) -> bytes:
    raw = bytearray(data)
    if how == "crc":
        raw[-1] ^= 0x01
    elif how == "magic":
        raw[16] = 7
    elif how == "base-offset":
        raw[7] = 5
    else:
        raw = raw[:10]
    return bytes(raw)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as b:
        yield b


part = st.tuples(st.integers(0, PARTITIONS - 1),
                 st.lists(st.binary(max_size=40), min_size=1, max_size=4),
                 st.sampled_from([None, "crc", "magic", "base-offset", "empty"]),
                 st.sampled_from(["none", "gzip", "lz4"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=st.lists(st.lists(part, min_size=1, max_size=PARTITIONS, unique_by=lambda p: p[0]),
                         min_size=1, max_size=5))
def test_random_produce_requests_against_a_model(broker: Broker, requests: list[list[Any]]) -> None:
    topic = f"model-{next(_topics)}"
    assert broker.store is not None and broker.runtime is not None
    broker.store.create_topic(topic, {p: (1,) for p in range(PARTITIONS)})
    while topic not in broker.runtime.cluster.topics:
        time.sleep(0.001)
    model: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with KafkaSocket(broker.bootstrap_servers) as conn:
        for request in requests:
            data = {}
            for partition, values, how, codec in request:
                valid = build_record_batch([{"value": v, "timestamp": 1} for v in values], compression=codec)
                data[partition] = valid if how is None else damage(valid, how)
            body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
                {"name": topic, "partition_data": [{"index": p, "records": d} for p, d in data.items()]}]}
            [answer] = conn.call(ApiKey.PRODUCE, 9, body).body["responses"]
            by_index = {a["index"]: a for a in answer["partition_responses"]}
            for partition, values, how, _ in request:
                got = by_index[partition]
                if how is None:
                    assert (got["error_code"], got["base_offset"]) == (0, len(model[partition]))
                    model[partition].extend(values)
                else:
                    assert (got["error_code"], got["base_offset"]) == (DAMAGES[how], -1)
    [module] = [m for m in broker.runtime.modules if isinstance(m, DataPlaneModule)]
    for partition, values in model.items():
        log = module.partitions.logs.get(topic, partition)
        stored: list[bytes | None] = []
        if log is not None:
            for segment in log.segments:
                for batch in segment.batches():
                    assert isinstance(batch, RecordBatch)
                    stored.extend(record.value for record in batch.record_list())
        assert stored == values
