"""kafkapy: Kafka's wire protocol from the broker side."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Broker", "VirtualClock", "__version__"]

if TYPE_CHECKING:
    from kafkapy.embedded import Broker
    from kafkapy.server.clock import VirtualClock


def __getattr__(name: str) -> Any:
    # Lazy, so that `import kafkapy.protocol` stays free of asyncio and sockets.
    if name == "Broker":
        from kafkapy.embedded import Broker

        return Broker
    if name == "VirtualClock":
        from kafkapy.server.clock import VirtualClock

        return VirtualClock
    raise AttributeError(name)
