"""Golden byte vectors for the seed messages, written by hand from the seeds' field lists.

Each vector is a frame without its size prefix (the seeds' ``size`` field).
Requests use header v1: api_key int16 (the seeds' request_type_id),
api_version int16, correlation_id int32, client_id int16-length string.
Responses use header v0: correlation_id int32. Keys 1000-1004 come from seed 001,
1010 from seed 002 (KIP-35 draft), and 1020 from seed 004 (KIP-584).
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkapy.protocol import catalogue, decode_request, decode_response, encode_request, encode_response


def s(text: str) -> str:
    """A non-compact string: int16 length, then UTF-8, in hex."""
    data = text.encode()
    return f"{len(data):04x}" + data.hex()


def header(key: int, corr: int = 7, client: str = "c1") -> str:
    return f"{key:04x}" + "0000" + f"{corr:08x}" + s(client)


REQUESTS: list[tuple[str, int, dict[str, Any], str]] = [
    ("ClusterMetadata", 1000, {}, header(1000)),
    ("RegisterConsumer", 1001,
     {"group_id": "g", "consumer_id": "c-1", "topic_count": '{"version":1}', "auto_commit": True,
      "auto_offset_reset": "smallest", "session_timeout_ms": 6000},
     header(1001) + s("g") + s("c-1") + s('{"version":1}') + "01" + s("smallest") + "00001770"),
    ("Ping", 1002, {"consumer_id": "c-1", "num_retries": 2}, header(1002) + s("c-1") + "00000002"),
    ("StopFetcher", 1003, {"consumer_id": "c-1"}, header(1003) + s("c-1")),
    ("StartFetcher", 1004,
     {"consumer_id": "c-1",
      "ownership_info": [{"consumer_thread_id": "c-1-0",
                          "assigned_parts": [{"topic": "t", "partition": "1-0", "offset": 42}]}],
      "brokers_info": [{"id": 1, "host": "h", "port": 9092}]},
     header(1004) + s("c-1")
     + "0001" + s("c-1-0") + "0001" + s("t") + s("1-0") + "000000000000002a"  # int16 counts
     + "0001" + "00000001" + s("h") + "00002384"),
    ("BrokerMetadata", 1010, {"node_ids": [-1]}, header(1010) + "00000001" + "ffffffff"),
    ("BrokerMetadata (all)", 1010, {"node_ids": []}, header(1010) + "00000000"),
    # Flexible from v0: header v2 (client id stays non-compact, then an empty tag section),
    # compact array of compact strings, and a tag section closing the body.
    ("DeleteFeatures", 1020, {"timeout_ms": 60000, "feature_names": ["kafkapy.coordinator"]},
     f"{1020:04x}" + "0000" + "00000007" + s("c1") + "00" + "0000ea60" + "02"
     + f"{len('kafkapy.coordinator') + 1:02x}" + b"kafkapy.coordinator".hex() + "00"),
]

RESPONSES: list[tuple[str, int, dict[str, Any], str]] = [
    ("ClusterMetadata", 1000,
     {"error_code": 0, "coordinator_id": 2, "brokers_info": [{"id": 1, "host": "a", "port": 9092},
                                                             {"id": 2, "host": "b", "port": 9093}]},
     "00000007" + "0000" + "00000002" + "0002" + "00000001" + s("a") + "00002384"
     + "00000002" + s("b") + "00002385"),
    ("RegisterConsumer", 1001, {"error_code": 26}, "00000007" + "001a"),
    ("Ping without offsets (auto_commit off)", 1002,
     {"request_type_id": 1002, "error_code": 0, "consumer_id": "c-1", "offset_info": None},
     "00000007" + "03ea" + "0000" + s("c-1")),
    ("Ping with offsets", 1002,
     {"request_type_id": 1002, "error_code": 0, "consumer_id": "c-1",
      "offset_info": [{"topic": "t", "partition": "1-0", "offset": 5}]},
     "00000007" + "03ea" + "0000" + s("c-1") + "0001" + s("t") + s("1-0") + "0000000000000005"),
    ("StopFetcher with offsets", 1003,
     {"request_type_id": 1003, "error_code": 0, "consumer_id": "c-1",
      "offset_info": [{"topic": "t", "partition": "1-0", "offset": 9}]},
     "00000007" + "03eb" + "0000" + s("c-1") + "0001" + s("t") + s("1-0") + "0000000000000009"),
    ("StartFetcher", 1004, {"request_type_id": 1004, "error_code": 0, "consumer_id": "c-1"},
     "00000007" + "03ec" + "0000" + s("c-1")),
    ("BrokerMetadata", 1010,
     {"brokers": [{"node_id": 3, "host": "h", "port": 9092, "protocol_version_min": 0,
                   "protocol_version_max": 1, "tags": [{"key": "rack", "value": "r8a9"}]}]},
     "00000007" + "00000001" + "00000003" + s("h") + "00002384" + "00000000" + "00000001"
     + "00000001" + s("rack") + s("r8a9")),
    ("DeleteFeatures", 1020,
     {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
      "results": [{"feature": "f", "error_code": 0, "error_message": None}]},
     "00000007" + "00" + "00000000" + "0000" + "00" + "02" + "0266" + "0000" + "00" + "00" + "00"),
]


@pytest.mark.parametrize(("name", "key", "body", "vector"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_seed_request_golden_vector(name: str, key: int, body: dict[str, Any], vector: str) -> None:
    frame = bytes.fromhex(vector)
    assert encode_request(key, 0, 7, "c1", body).hex() == vector
    request = decode_request(frame)
    assert (request.api_key, request.correlation_id, request.client_id) == (key, 7, "c1")
    assert request.body == body and request.trailing_bytes == 0


@pytest.mark.parametrize(("name", "key", "body", "vector"), RESPONSES, ids=[r[0] for r in RESPONSES])
def test_seed_response_golden_vector(name: str, key: int, body: dict[str, Any], vector: str) -> None:
    assert encode_response(key, 0, 7, body).hex() == vector
    response = decode_response(bytes.fromhex(vector), key, 0)
    assert response.correlation_id == 7 and response.body == body and response.trailing_bytes == 0


def test_seed_specs_name_their_seed() -> None:
    seeds = {key: api.request.seed for key, api in catalogue().items() if key >= 1000}
    assert seeds == {1000: "001_f9e6e7954a65de89.txt", 1001: "001_f9e6e7954a65de89.txt",
                     1002: "001_f9e6e7954a65de89.txt", 1003: "001_f9e6e7954a65de89.txt",
                     1004: "001_f9e6e7954a65de89.txt", 1010: "002_c129072a24fe860b.txt",
                     1020: "004_6d3c7fede38c3648.txt"}
