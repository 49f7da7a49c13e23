"""Create topic policies for tests/topics/test_create_topic_policy.py (named by dotted path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkapy.topics import CreateTopicRequest, PolicyViolation

SEEN: list[CreateTopicRequest] = []


class AtMostFourPartitions:
    """Refuses a topic of more than four partitions, or of any name starting "forbidden"."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.limit = int(configs.get("num.partitions", 1)) + 3

    def validate(self, request: CreateTopicRequest) -> None:
        SEEN.append(request)
        if request.topic.startswith("forbidden"):
            raise PolicyViolation(f"Topic {request.topic} is forbidden")
        count = request.num_partitions if request.num_partitions is not None else len(
            request.replicas_assignments or {})
        if count > self.limit:
            raise PolicyViolation(
                f"Topic {request.topic} would have {count} partitions; at most {self.limit}")


class Broken:
    def validate(self, request: CreateTopicRequest) -> None:
        raise RuntimeError("policy bug")
