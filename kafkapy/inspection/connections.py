"""The client connections a broker holds open: ``broker.connections()``.

What a test asks of a connection it cannot see from the client side: who the broker takes it for
(its principal), and on a SASL listener how it authenticated, how often (re-authentications,
KIP-368, are the rest) and when its session ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import attrs

from kafkapy.server.connection import KafkaConnection

__all__ = ["ConnectionView", "connection_views"]


@attrs.frozen
class ConnectionView:
    """One open connection, as the broker holds it now."""

    broker_id: int
    id: str
    listener: str
    security_protocol: str
    client_address: tuple[str, int]
    principal: str
    sasl_mechanism: str | None = None  # the mechanism of its last SASL exchange (None: no SASL)
    authentications: int = 0  # SASL exchanges completed on it: the first, then each re-authentication
    session_end_ms: int | None = None  # when its SASL session ends (epoch ms, broker clock); None: never


def connection_views(broker_id: int, connections: Iterable[KafkaConnection]) -> Iterator[ConnectionView]:
    """The open connections of one broker, by id."""
    for connection in sorted(connections, key=lambda c: c.info.id if c.info is not None else ""):
        info = connection.info
        if info is None or connection.closed:
            continue
        authenticator = connection.authenticator
        server = authenticator.server if authenticator is not None else None
        yield ConnectionView(broker_id, info.id, info.listener, info.security_protocol, info.client_address,
                             info.principal, server.mechanism if server is not None else None,
                             authenticator.authentications if authenticator is not None else 0,
                             authenticator.session_end_ms if authenticator is not None else None)
