"""What the admin tools (delete-records, leader-election, log-dirs, broker-api-versions,
get-offsets) share: PartitionClient's leader routing and per-broker version choice, plus the
brokers Metadata lists, the controller, and the one-line wording of a Kafka error.

The tools name partitions as Kafka's TopicPartition.toString does (``topic-partition``), since
scripts written for Kafka's tools parse those names.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._partitions import NO_REPLICA, RETRIED, PartitionClient, Retry, check_error, error_code
from kafkapy.commands._security import client_options
from kafkapy.errors import ErrorCode
from kafkapy.protocol import api_name
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["AdminClient", "BrokerNode", "error_text", "partition_name"]

READ_UNCOMMITTED = 0  # ListOffsets' isolation level of Kafka's admin client, GetOffsetShell's
# Metadata v1 is the first with racks and the controller id, which these tools print and use.
_BROKERS_METADATA_VERSION = 1


def partition_name(topic: str, partition: int) -> str:
    """Kafka's TopicPartition.toString."""
    return f"{topic}-{partition}"


def error_text(code: int, message: str | None = None) -> str:
    """A Kafka error in one phrase: its code's name, then the broker's message if it sent one."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message}" if message else name


@dataclasses.dataclass(frozen=True)
class BrokerNode:
    """A broker as Metadata lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        """Kafka's Node.toString, the form kafka-broker-api-versions.sh prints."""
        return f"{self.host}:{self.port} (id: {self.node_id} rack: {self.rack or 'null'})"


class AdminClient(PartitionClient):
    """PartitionClient with the admin APIs these tools send; each version range's oldest is the
    first that has what the tool needs, its newest the newest whose body the tool writes."""

    versions = {
        **PartitionClient.versions,
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
        ApiKey.ELECT_LEADERS: (0, 2),  # v1 adds the election type: an unclean election needs it
        ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
        ApiKey.LIST_OFFSETS: (1, 9),  # max-timestamp needs v7, earliest-local v8, latest-tiered v9
    }

    @classmethod
    def from_args(cls, args: argparse.Namespace, client_id: str) -> AdminClient:
        return cls(args.bootstrap_server, args.timeout, client_id, security=client_options(args))

    def cluster(self) -> tuple[list[BrokerNode], int]:
        """The brokers Metadata lists (by id) and the controller's id (-1 if none)."""
        body = self._bootstrap.request(ApiKey.METADATA, _BROKERS_METADATA_VERSION, {"topics": []})
        brokers = sorted((BrokerNode(b["node_id"], b["host"], b["port"], b.get("rack"))
                          for b in body["brokers"]), key=lambda b: b.node_id)
        for broker in brokers:
            self._addresses[broker.node_id] = broker.address
        controller: int = body.get("controller_id", -1)
        return brokers, controller

    def connection(self, node_id: int) -> SimpleClient:
        """The connection to broker ``node_id`` (listed by the last :meth:`cluster` or topics)."""
        if node_id not in self._addresses:
            raise ClientError(f"broker {node_id} is not in the metadata")
        return self._broker(node_id)

    def call(self, connection: SimpleClient, api_key: ApiKey, body: Mapping[str, Any],
             oldest: int | None = None) -> dict[str, Any]:
        """One request at the newest version both sides have, at least ``oldest`` (a feature
        the request needs); a broker without it is one ClientError."""
        if oldest is not None:
            served = self.version_for(connection, api_key)
            if served < oldest:
                raise ClientError(f"{connection.host}:{connection.port} serves {api_name(api_key)} only up "
                                  f"to v{served}; v{oldest}+ needed")
        answer: dict[str, Any] = dict(self._request(connection, api_key, body))
        return answer

    def version_for(self, connection: SimpleClient, api_key: ApiKey) -> int:
        """The version :meth:`call` sends ``api_key`` at to this broker."""
        return self._version(connection, api_key)

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords of one partition at its leader: (error, the new low watermark), the
        retriable errors retried with fresh metadata until the timeout."""

        def attempt() -> tuple[ErrorCode, int]:
            body = self.call(self._leader(topic, partition), ApiKey.DELETE_RECORDS, {
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
                "timeout_ms": int(self.timeout * 1000)})
            (answer,) = body["topics"][0]["partitions"]
            error = error_code(answer["error_code"])
            if error in RETRIED:
                raise Retry(f"delete records of {partition_name(topic, partition)}: {error.name}")
            low_watermark: int = answer["low_watermark"]
            return error, low_watermark

        return self._retrying(attempt)

    def offset_at(self, topic: str, partition: int, timestamp: int, oldest: int = 1) -> int:
        """ListOffsets of one partition at its leader, at version ``oldest`` or newer (the special
        timestamps need it); -1 when the broker knows no such offset."""

        def attempt() -> int:
            body = self.call(self._leader(topic, partition), ApiKey.LIST_OFFSETS, {
                "replica_id": NO_REPLICA, "isolation_level": READ_UNCOMMITTED,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition,
                                                          "timestamp": timestamp}]}]}, oldest)
            (answer,) = body["topics"][0]["partitions"]
            check_error(answer["error_code"], f"list offsets of {partition_name(topic, partition)}")
            offset: int = answer["offset"]
            return offset

        return self._retrying(attempt)
