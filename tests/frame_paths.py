"""For the contract tests that hold a from-frame path equal to the plain path: the dispatcher's
paths wrapped to count what they answer (the fast path must be shown taken), and one read's answer."""

from __future__ import annotations

from typing import Any

from kafkapy.embedded import Broker
from kafkapy.protocol.framing import ReceivedFrame
from kafkapy.server.connection import CloseConnection, ConnectionInfo
from kafkapy.server.modules import FromFrame

__all__ = ["CountedPaths", "answer_one_read"]


class CountedPaths(dict[bytes, FromFrame]):
    """Set as ``dispatcher.frame_paths``: each path counts the frames it answered (not declined)
    in ``CountedPaths.answered``, which tests read as a difference before and after a request."""

    answered = 0

    def __setitem__(self, key: bytes, answerer: FromFrame) -> None:
        def counted(conn: ConnectionInfo, frame: ReceivedFrame) -> bytes | None:
            wire = answerer(conn, frame)
            if wire is not None:
                type(self).answered += 1
            return wire
        super().__setitem__(key, counted)


def answer_one_read(broker: Broker, connection: ConnectionInfo, frame: bytes | bytearray) -> bytes | str:
    """What one read holding ``frame`` answers: the wire bytes, or "closed". Nothing may wait (every
    partition the tests use is led by this broker)."""
    assert broker.runtime is not None
    dispatcher = broker.runtime.dispatcher

    def run() -> bytes | str:
        out: list[Any] = []
        try:
            pending = dispatcher.dispatch_all(connection, iter([frame]), out, lambda: False)
        except CloseConnection:
            return "closed"
        assert pending is None
        return b"".join(bytes(chunk) for chunk in out)
    return broker._on_loop(run)
