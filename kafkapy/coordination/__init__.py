"""Seed 001: the pre-0.9 broker-side consumer coordinator (module) and its consumer client.

Enable on a broker with ``kafkapy.modules=coordination``; see docs/coordination.md.
"""

from kafkapy.coordination.module import CoordinationModule

__all__ = ["CoordinationModule"]
