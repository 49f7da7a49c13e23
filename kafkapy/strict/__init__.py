"""Strict mode: protocol misuse that a real broker tolerates, recorded so that tests can fail on it.

``Broker(strict=True)`` (or ``kafkapy.strict=true``, or the pytest marker ``kafka_strict``) records
each misuse as a :class:`Violation` in ``broker.violations``; the pytest plugin fails a test whose
broker recorded any. See docs/testing.md, "Strict mode", for the kinds and why each is misuse.
"""

from kafkapy.strict.groups import assigned_partitions
from kafkapy.strict.interceptor import StrictInterceptor
from kafkapy.strict.module import STRICT, STRICT_CAPABILITY, StrictModule
from kafkapy.strict.violations import Violation, ViolationKind, Violations

__all__ = ["STRICT", "STRICT_CAPABILITY", "StrictInterceptor", "StrictModule", "Violation", "ViolationKind",
           "Violations", "assigned_partitions"]
