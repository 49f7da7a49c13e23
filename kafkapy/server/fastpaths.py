"""The broker's fast paths, and the switch that turns each off.

Each fast path is a second way to do what a plain path already does, kept
because the plain way costs measurably more on the hot path. Each lives in one
module, reaches into no other kafkapy module's state, and is held equal to its
plain path by a test that runs the same conversation with it off and compares
the bytes (tests/server/test_fast_paths.py):

* ``memo`` (kafkapy.server.memo): answers to requests whose answer is a function
  of their bytes (``ApiHandler.memoize``: ApiVersions) are replayed from a
  bounded memo, with no decoding and no handler. Plain path: decode, handle,
  encode every time.
* ``in_place_accept`` (kafkapy.server.accept): an accepted plaintext socket gets
  its transport at once, through asyncio's selector loop's own
  ``_make_socket_transport`` (what asyncio's servers call per socket), saving a
  task and a waiter per accept. Plain path: ``loop.connect_accepted_socket`` in
  a task. This is the one place kafkapy touches asyncio's private API; a loop
  without it takes the plain path.
* ``eager`` (kafkapy.server.eager): the accept gate and admission coroutines are
  stepped in place, so a connection that nothing holds back needs no task (a module's
  ``on_accept`` hook makes admission go on in a task: it may need one from its first line).
  Plain path: a task runs them. Handlers are stepped in place only when they
  declare it (``ApiHandler.in_place``: the transaction coordinator's APIs, which
  never wait on a broker with local logs); the others start inside the
  connection's worker task, so ``asyncio.current_task()`` and
  ``asyncio.timeout()`` work in them from their first line (plain-function
  handlers, the fastest kind, need no coroutine at all). Plain path: every
  coroutine handler in the worker task.
* ``in_place_chain`` (kafkapy.server.interceptors): an interceptor chain whose
  interceptors all allow it is stepped in place like the accept gate, so a request
  whose hooks do not suspend costs no task; a coroutine handler inside it still
  starts in the worker task (unless it is ``in_place``). Plain path: every request
  through the chain runs in the connection's worker task.
* ``chunked_responses`` (kafkapy.protocol.chunks): a ChunkedResponse (Fetch) is
  written as several buffers, the stored record batches among them, with
  ``transport.writelines``. Plain path: the records joined into one encoded frame.
* ``from_frame`` (``ApiHandler.from_frame``; Produce's is kafkapy.dataplane.produce_frame): the
  common request of an API answered straight from the frame's bytes, or declined before any
  effect, when no observer, module hook or applying interceptor sees it. Plain path: decode,
  handler, encode every time. Held equal by tests/dataplane/test_produce_from_frame.py
  (AddPartitionsToTxn's and EndTxn's, kafkapy.transactions.from_frame: by
  tests/transactions/test_txn_from_frame.py).
* ``kept_frames`` (kafkapy.protocol.framing): a large frame that spans reads is handed out as the
  bytearray its body was received into (no copy out); the plain path of the dispatcher takes
  ``bytes`` of it, a ``from_frame`` fast path reads it as it is. Plain path: every frame handed
  out as ``bytes``. Held equal by tests/server/test_framing.py (the frames) and
  tests/dataplane/test_produce_from_frame.py (Produce from a kept frame).
* ``buffered_reads`` (kafkapy.server.connection.BufferedKafkaConnection, an
  asyncio.BufferedProtocol): the socket is read into the FrameBuffer's buffers, a frame that
  spans reads straight into its body, other reads into one read buffer the broker's connections
  share. Plain
  path: asyncio.Protocol's ``data_received`` of a fresh ``bytes`` per read. Held equal by
  tests/server/test_framing.py (the same frames after the same reads) and
  tests/server/test_fast_paths.py (the same answers and stored records).
"""

from __future__ import annotations

import attrs

__all__ = ["FastPaths"]


@attrs.frozen
class FastPaths:
    """Which fast paths are on (all, unless a test compares them with their plain paths)."""

    memo: bool = True
    in_place_accept: bool = True
    eager: bool = True
    chunked_responses: bool = True
    in_place_chain: bool = True
    from_frame: bool = True
    kept_frames: bool = True
    buffered_reads: bool = True

    @classmethod
    def none(cls) -> FastPaths:
        """Every plain path."""
        return cls(memo=False, in_place_accept=False, eager=False, chunked_responses=False,
                   in_place_chain=False, from_frame=False, kept_frames=False, buffered_reads=False)
