"""Alter config policies for tests/configs/test_alter_config_policy.py (named by dotted path)."""

from __future__ import annotations

from kafkapy.server.policies import AlterConfigRequest, PolicyViolation

SEEN: list[AlterConfigRequest] = []


class NoShortRetention:
    """Refuses retention.ms below an hour, on any resource."""

    def validate(self, request: AlterConfigRequest) -> None:
        SEEN.append(request)
        value = request.configs.get("retention.ms") or request.configs.get("log.retention.ms")
        if value is not None and int(value) < 3_600_000:
            raise PolicyViolation(f"retention of {value} ms is too short")
