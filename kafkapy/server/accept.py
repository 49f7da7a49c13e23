"""Fast path: an accepted plaintext socket gets its transport at once (see kafkapy.server.fastpaths).

``loop.connect_accepted_socket`` is a coroutine that waits for the transport to be ready, so
each accept would cost a task, a future and their loop steps. asyncio's selector loops make the
transport with ``_make_socket_transport``, which is what their own servers call per accepted
socket; the broker's accept loop already needs a selector loop (``add_reader``). This module is
the only place kafkapy reaches for that private method, and it checks that it is there.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

__all__ = ["MakeTransport", "in_place_transport"]

MakeTransport = Callable[[socket.socket, asyncio.Protocol], object]


def in_place_transport(loop: asyncio.AbstractEventLoop) -> MakeTransport | None:
    """How to wrap an accepted plaintext socket in a transport at once, or None on a loop that
    offers no way (then ``loop.connect_accepted_socket`` in a task does it)."""
    if not isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop):
        return None
    make = getattr(loop, "_make_socket_transport", None)
    if make is None:
        return None

    def transport(sock: socket.socket, protocol: asyncio.Protocol) -> object:
        return make(sock, protocol)

    return transport
