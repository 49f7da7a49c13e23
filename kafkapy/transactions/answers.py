"""How the coordinator's answers are worded, the same for the plain path and the path from the frame."""

from __future__ import annotations

from collections.abc import Mapping

from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.transactions.metadata import TopicPartition

__all__ = ["by_topic", "for_version"]

# PRODUCER_FENCED (KIP-588) is answered as INVALID_PRODUCER_EPOCH below these versions.
_FENCED_SINCE: dict[ApiKey, int] = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
                                    ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2}


def for_version(api_key: ApiKey, api_version: int, code: ErrorCode) -> ErrorCode:
    """``code`` as a client of this version knows it."""
    if code == ErrorCode.PRODUCER_FENCED and api_version < _FENCED_SINCE.get(api_key, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def by_topic(codes: Mapping[TopicPartition, ErrorCode]) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
    """AddPartitionsToTxn's results: per topic (in order of first appearance) its partitions' codes."""
    grouped: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, partition), code in codes.items():
        grouped.setdefault(topic, []).append((partition, code))
    return list(grouped.items())
