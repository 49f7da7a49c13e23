"""The admin half of ``kafkapy topics``: CreateTopics, DeleteTopics and CreatePartitions sent to
the controller, and DescribeConfigs of topics.

Why the controller: in ZooKeeper mode only Kafka's controller applies these changes, and the
other brokers answer NOT_CONTROLLER (kafkapy's brokers do the same).  Kafka's admin client then
asks Metadata who the controller is and sends again; so does this client, until ``timeout``.
A topic's other errors are the answer, not a reason to retry: they come back as
:class:`Outcome` for the command to print.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from kafkapy.commands._partitions import BASE_VERSIONS, PartitionClient, Retry, check_error, error_code
from kafkapy.commands.configs import TOPIC_RESOURCE
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.primitives import ZERO_UUID

__all__ = ["NO_DEFAULT", "NewTopic", "Outcome", "TopicAdminClient", "TopicConfig"]

NO_DEFAULT = -1  # CreateTopics' num_partitions/replication_factor: "the broker's default" (KIP-464)

# (oldest, newest) version this module writes bodies for. CreateTopics from v4, the first that
# takes -1 for the broker's defaults (KIP-464); DeleteTopics all (v6 names topics in a struct,
# older versions in a string array: the body carries both, fit_body keeps the version's);
# DescribeConfigs from v1, the first with each entry's config_source.
_ADMIN_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    **BASE_VERSIONS,
    ApiKey.CREATE_TOPICS: (4, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
}


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One topic's answer: Kafka's error code (NONE on success) and the broker's message."""

    topic: str
    error: ErrorCode
    message: str | None


@dataclasses.dataclass(frozen=True)
class NewTopic:
    """A CreateTopics entry: explicit replicas per partition, or counts (NO_DEFAULT: the broker's)."""

    name: str
    partitions: int = NO_DEFAULT
    replication_factor: int = NO_DEFAULT
    assignment: Sequence[Sequence[int]] = ()
    configs: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TopicConfig:
    """A topic's config entry as DescribeConfigs shows it."""

    name: str
    value: str | None
    source: int  # Kafka's DescribeConfigsResponse.ConfigSource
    is_sensitive: bool


class TopicAdminClient(PartitionClient):
    """PartitionClient plus the topic admin requests."""

    versions: ClassVar[Mapping[ApiKey, tuple[int, int]]] = _ADMIN_VERSIONS

    def _to_controller(self, api_key: ApiKey, body: Mapping[str, Any], results: str) -> list[Outcome]:
        """Send ``body`` to the controller Metadata names now; each entry of the answer's
        ``results`` array as an Outcome. NOT_CONTROLLER (the controller moved) is retried."""

        def attempt() -> list[Outcome]:
            target = self.controller()
            answer = self._request(target, api_key, body)
            outcomes = [Outcome(r["name"], error_code(r["error_code"]), r.get("error_message"))
                        for r in answer[results]]
            if any(o.error is ErrorCode.NOT_CONTROLLER for o in outcomes):
                where = f"broker {self.controller_id}" if target is not self._bootstrap else \
                    f"{target.host}:{target.port}"
                raise Retry(f"{where}: NOT_CONTROLLER")
            return outcomes

        return self._retrying(attempt)

    def create_topic(self, topic: NewTopic) -> Outcome:
        entry = {"name": topic.name, "num_partitions": topic.partitions,
                 "replication_factor": topic.replication_factor,
                 "assignments": [{"partition_index": i, "broker_ids": list(replicas)}
                                 for i, replicas in enumerate(topic.assignment)],
                 "configs": [{"name": k, "value": v} for k, v in topic.configs.items()]}
        if topic.assignment:
            entry.update(num_partitions=NO_DEFAULT, replication_factor=NO_DEFAULT)
        (outcome,) = self._to_controller(ApiKey.CREATE_TOPICS, {
            "topics": [entry], "timeout_ms": self._timeout_ms, "validate_only": False}, "topics")
        return outcome

    def delete_topics(self, names: Sequence[str]) -> list[Outcome]:
        return self._to_controller(ApiKey.DELETE_TOPICS, {
            "topic_names": list(names), "topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
            "timeout_ms": self._timeout_ms}, "responses")

    def create_partitions(self, counts: Mapping[str, int],
                          assignments: Mapping[str, Sequence[Sequence[int]]]) -> list[Outcome]:
        """Grow each topic to ``counts[topic]`` partitions; the new ones on ``assignments[topic]``
        when given (one replica list per new partition), else where the controller places them."""
        topics = [{"name": name, "count": count,
                   "assignments": [{"broker_ids": list(r)} for r in assignments[name]]
                   if name in assignments else None} for name, count in counts.items()]
        return self._to_controller(ApiKey.CREATE_PARTITIONS, {
            "topics": topics, "timeout_ms": self._timeout_ms, "validate_only": False}, "results")

    def topic_configs(self, names: Sequence[str]) -> dict[str, list[TopicConfig]]:
        """Every config of each topic (DescribeConfigs, any broker: it answers topics itself)."""
        if not names:
            return {}

        resources = [{"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
                     for n in names]

        def attempt() -> dict[str, list[TopicConfig]]:  # a retriable error is retried until --timeout
            body = self._request(self._bootstrap, ApiKey.DESCRIBE_CONFIGS, {
                "resources": resources, "include_synonyms": False, "include_documentation": False})
            found: dict[str, list[TopicConfig]] = {}
            for result in body["results"]:
                name = result["resource_name"]
                check_error(result["error_code"], f"configs of topic {name!r}")
                found[name] = [TopicConfig(c["name"], c["value"], c["config_source"], c["is_sensitive"])
                               for c in result["configs"]]
            return found

        return self._retrying(attempt)

    @property
    def _timeout_ms(self) -> int:
        return int(self.timeout * 1000)
