"""The dispatcher's from-frame paths wrapped to count what they answer, for the contract tests that
hold a fast path equal to the plain path and must also show the fast path was taken."""

from __future__ import annotations

from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.framing import ReceivedFrame
from kafkapy.server.modules import FromFrame

__all__ = ["CountedPaths"]


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
