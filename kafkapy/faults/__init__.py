"""Fault injection for tests: rules that make the broker fail requests the way real ones do.

``broker.faults.add(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE,
times=2))`` returns a handle (``fired``, ``remove()``); ``with broker.faults.injected(rule):``
scopes a rule to a block. See docs/testing.md.

``ErrorCode`` and ``ApiKey`` are re-exported (they live in kafkapy.errors and
kafkapy.protocol.api_keys), so a rule needs one import:
``from kafkapy.faults import ApiKey, ErrorAnswer, ErrorCode, FaultRule``.
"""

from kafkapy.errors import ErrorCode
from kafkapy.faults.coordinators import CoordinatorOutage, CoordinatorOutages
from kafkapy.faults.injector import FaultHandle, FaultInjector, Faults
from kafkapy.faults.matching import named_partitions
from kafkapy.faults.module import FAULTS_CAPABILITY, FaultsModule
from kafkapy.faults.rules import (
    Delay,
    DropConnection,
    ErrorAnswer,
    FaultAction,
    FaultRule,
    Stall,
    Throttle,
    TruncateResponse,
)
from kafkapy.faults.spread import ClusterFaults, FaultRules, RuleHandle, SpreadHandle
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["FAULTS_CAPABILITY", "ApiKey", "ClusterFaults", "CoordinatorOutage", "CoordinatorOutages", "Delay",
           "DropConnection", "ErrorAnswer", "ErrorCode", "FaultAction", "FaultHandle", "FaultInjector",
           "FaultRule", "FaultRules", "Faults", "FaultsModule", "RuleHandle", "SpreadHandle", "Stall",
           "Throttle", "TruncateResponse", "named_partitions"]
