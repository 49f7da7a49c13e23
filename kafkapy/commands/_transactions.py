"""The admin client behind ``kafkapy transactions``: what kafka-transactions.sh asks a cluster.

A transactional id lives on its coordinator (FindCoordinator with key type TRANSACTION);
ListTransactions goes to every broker (each lists the ids it coordinates); DescribeProducers and
the WriteTxnMarkers of an abort go to the partition's leader, as Kafka's Admin sends them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import ClassVar

from kafkapy.commands._partitions import BASE_VERSIONS, PartitionClient, check_error
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.schema import Body

__all__ = ["MAX_PARTITIONS_PER_REQUEST", "ProducerState", "TransactionClient", "TransactionDescription",
           "TransactionListing"]

_TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key_type for a transactional id
MAX_PARTITIONS_PER_REQUEST = 500  # kafka-transactions.sh find-hanging's batches
_TRANSACTION_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    **BASE_VERSIONS,
    ApiKey.FIND_COORDINATOR: (1, 3),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
}


@dataclasses.dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclasses.dataclass(frozen=True)
class TransactionDescription:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int  # -1: no transaction has started
    partitions: tuple[tuple[str, int], ...]


@dataclasses.dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int  # -1: none open


class TransactionClient(PartitionClient):
    """Transaction admin requests, each sent where Kafka's Admin sends it."""

    versions: ClassVar[Mapping[ApiKey, tuple[int, int]]] = _TRANSACTION_VERSIONS

    def coordinator(self, transactional_id: str) -> int:
        def attempt() -> int:
            body = self._request(self._bootstrap, ApiKey.FIND_COORDINATOR,
                                 {"key": transactional_id, "key_type": _TRANSACTION_KEY_TYPE})
            check_error(body["error_code"], f"find the coordinator of transactional id {transactional_id!r}")
            node: int = body["node_id"]
            host, port = body["host"], body["port"]
            self._addresses[node] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            return node

        return self._retrying(attempt)

    def list_transactions(self, duration_filter_ms: int | None = None,
                          producer_ids: Collection[int] = ()) -> list[TransactionListing]:
        self.topics([])  # learns every broker's address
        found: list[TransactionListing] = []
        for node in sorted(self._addresses):
            def attempt(node: int = node) -> Body:  # a retriable error is retried, as Kafka's admin does
                body = self._request(self._broker(node), ApiKey.LIST_TRANSACTIONS, {
                    "state_filters": [], "producer_id_filters": sorted(producer_ids),
                    "duration_filter": -1 if duration_filter_ms is None else duration_filter_ms})
                check_error(body["error_code"], f"list transactions on broker {node}")
                return body

            body = self._retrying(attempt)
            found.extend(TransactionListing(t["transactional_id"], node, t["producer_id"],
                                            t["transaction_state"]) for t in body["transaction_states"])
        return sorted(found, key=lambda t: (t.coordinator, t.transactional_id))

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        def attempt() -> TransactionDescription:
            node = self.coordinator(transactional_id)
            body = self._request(self._broker(node), ApiKey.DESCRIBE_TRANSACTIONS,
                                 {"transactional_ids": [transactional_id]})
            (state,) = body["transaction_states"]
            check_error(state["error_code"], f"describe transactional id {transactional_id!r}")
            return TransactionDescription(
                node, transactional_id, state["producer_id"], state["producer_epoch"],
                state["transaction_state"], state["transaction_timeout_ms"],
                state["transaction_start_time_ms"],
                tuple((t["topic"], p) for t in state["topics"] for p in t["partitions"]))

        return self._retrying(attempt)

    def describe_producers(self, topic: str, partition: int,
                           broker_id: int | None = None) -> list[ProducerState]:
        def attempt() -> list[ProducerState]:
            if broker_id is None:
                connection = self._leader(topic, partition)
            else:
                self.topics([topic])
                connection = self._broker(broker_id)
            body = self._request(connection, ApiKey.DESCRIBE_PRODUCERS,
                                 {"topics": [{"name": topic, "partition_indexes": [partition]}]})
            ((answer,),) = [t["partitions"] for t in body["topics"]]
            check_error(answer["error_code"], f"describe the producers of {topic}-{partition}")
            return [ProducerState(p["producer_id"], p["producer_epoch"], p["coordinator_epoch"],
                                  p["last_sequence"], p["last_timestamp"], p["current_txn_start_offset"])
                    for p in answer["active_producers"]]

        return self._retrying(attempt)

    def describe_producers_of(self, partitions: Sequence[tuple[str, int]],
                              broker_id: int | None = None) -> dict[tuple[str, int], list[ProducerState]]:
        """DescribeProducers for many partitions, as Kafka's Admin sends it: to ``broker_id``, or
        to each partition's leader, one request per broker per ``MAX_PARTITIONS_PER_REQUEST``."""
        def attempt() -> dict[tuple[str, int], list[ProducerState]]:
            by_node: dict[int, list[tuple[str, int]]] = {}
            for topic, partition in partitions:
                node = broker_id if broker_id is not None else self._leader_id(topic, partition)
                by_node.setdefault(node, []).append((topic, partition))
            found: dict[tuple[str, int], list[ProducerState]] = {}
            for node, asked in sorted(by_node.items()):
                for start in range(0, len(asked), MAX_PARTITIONS_PER_REQUEST):
                    chunk = asked[start:start + MAX_PARTITIONS_PER_REQUEST]
                    topics: dict[str, list[int]] = {}
                    for topic, partition in chunk:
                        topics.setdefault(topic, []).append(partition)
                    body = self._request(self._broker(node), ApiKey.DESCRIBE_PRODUCERS, {"topics": [
                        {"name": name, "partition_indexes": indexes} for name, indexes in topics.items()]})
                    for answered in body["topics"]:
                        for p in answered["partitions"]:
                            where = f"{answered['name']}-{p['partition_index']} on broker {node}"
                            check_error(p["error_code"], f"describe the producers of {where}")
                            found[(answered["name"], p["partition_index"])] = [
                                ProducerState(a["producer_id"], a["producer_epoch"], a["coordinator_epoch"],
                                              a["last_sequence"], a["last_timestamp"],
                                              a["current_txn_start_offset"])
                                for a in p["active_producers"]]
            return found

        return self._retrying(attempt)

    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
              coordinator_epoch: int) -> ErrorCode:
        """Write an ABORT marker for the producer's open transaction on the partition (Kafka's
        Admin.abortTransaction: WriteTxnMarkers to the leader)."""
        def attempt() -> ErrorCode:
            body = self._request(self._leader(topic, partition), ApiKey.WRITE_TXN_MARKERS, {"markers": [{
                "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
                "topics": [{"name": topic, "partition_indexes": [partition]}],
                "coordinator_epoch": coordinator_epoch}]})
            ((result,),) = [t["partitions"] for m in body["markers"] for t in m["topics"]]
            check_error(result["error_code"], f"abort on {topic}-{partition}")
            return ErrorCode.NONE

        return self._retrying(attempt)
