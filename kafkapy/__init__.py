"""kafkapy: Kafka's wire protocol from the broker side."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Broker", "__version__"]

if TYPE_CHECKING:
    from kafkapy.embedded import Broker


def __getattr__(name: str) -> Any:
    # Lazy, so that `import kafkapy.protocol` stays free of asyncio and sockets.
    if name == "Broker":
        from kafkapy.embedded import Broker

        return Broker
    raise AttributeError(name)
