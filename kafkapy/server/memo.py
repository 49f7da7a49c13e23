"""Fast path: answers replayed by request bytes (see kafkapy.server.fastpaths).

A handler declares ``ApiHandler.memoize`` when its answer is a function of the request's
version and its bytes after the correlation id (client id, body), and of broker state that only
changes along with the routing table (modules, feature gates). Then the answer to a request
seen before, byte for byte, is the one given last time, with this request's correlation id.
ApiVersions qualifies: each client library sends the same bytes on every connection. A replay
also repeats what the request tells its connection, the client software an ApiVersions declares
(``ConnectionInfo.client_software``, Kafka's ClientInformation), kept with the answer.

One table per API version, keyed by the request bytes after the correlation id, holding the
size prefix and the answer after the correlation id. A table holds ``MEMO_SIZE`` answers; when
full it starts over (client libraries are few, so it rarely fills). The tables are found by a
frame's first four bytes (API key and version); the dispatcher's loop looks them up inline
(``Dispatcher.dispatch_all``: two dict gets), and ``replay`` is that lookup as a function.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.server.connection import ConnectionInfo

__all__ = ["MEMO_SIZE", "AnswerMemo", "Software", "Table"]

MEMO_SIZE = 64  # memoized answers per API version; when full, it starts over
_SIZE = struct.Struct(">i")

Software = tuple[str, str] | None  # what a replay sets ConnectionInfo.client_software to (None: nothing)
# request bytes after the correlation id -> (size prefix, answer bytes after the correlation id, Software)
Table = dict[bytes, tuple[bytes, bytes, Software]]


class AnswerMemo:
    """The memo tables of one routing table (a rebuild starts a new AnswerMemo)."""

    __slots__ = ("tables",)

    def __init__(self) -> None:
        self.tables: dict[bytes, Table] = {}  # by a frame's first four bytes

    def table(self, frame: bytes) -> Table:
        """The table for the frame's API key and version (made on first use)."""
        table = self.tables.get(frame[:4])
        if table is None:
            table = self.tables[frame[:4]] = {}
        return table

    def replay(self, frame: bytes, out: list[bytes], conn: ConnectionInfo) -> bool:
        """Put the remembered answer to ``frame`` on ``out`` (size prefix, correlation id, the
        rest) and say True; False when there is none."""
        table = self.tables.get(frame[:4])
        if table is None:
            return False
        answer = table.get(frame[8:])
        if answer is None:
            return False
        out.append(answer[0])
        out.append(frame[4:8])
        out.append(answer[1])
        if answer[2] is not None:
            conn.client_software = answer[2]
        return True

    @staticmethod
    def remember(table: Table, frame: bytes, response: bytes, software: Software = None) -> None:
        """Keep ``response`` (correlation id first, no size prefix) as the answer to ``frame``,
        and ``software`` as what it sets the connection's client software to."""
        if len(frame) > 8:
            if len(table) >= MEMO_SIZE:
                table.clear()
            table[frame[8:]] = (_SIZE.pack(len(response)), response[4:], software)
