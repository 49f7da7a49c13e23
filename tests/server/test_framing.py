"""The sans-I/O pieces under a connection: frame splitting and coroutines started in place."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.framing import (
    KEEP_FROM,
    PREALLOCATE_UP_TO,
    READ_SIZE,
    FrameBuffer,
    FrameSizeError,
    ReceivedFrame,
)
from kafkapy.server import eager


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


BODIES = [b"first", b"", b"x" * 300, b"last"]
STREAM = b"".join(_frame(b) for b in BODIES)


def _split(chunks: list[bytes], limit: int = 1000) -> list[bytes]:
    buffer, out = FrameBuffer(limit), []
    for chunk in chunks:
        buffer.drain(chunk, out)
    assert buffer.pending == 0
    return out


def test_whole_frames_in_one_read() -> None:
    assert _split([STREAM]) == BODIES


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_frames_cut_anywhere(size: int) -> None:
    assert _split([STREAM[i:i + size] for i in range(0, len(STREAM), size)]) == BODIES


def test_a_partial_frame_waits_and_shows_as_pending() -> None:
    buffer, out = FrameBuffer(1000), []
    buffer.drain(STREAM[:7], out)
    assert out == [] and buffer.pending == 7
    buffer.drain(bytearray(STREAM[7:]), out)  # any bytes-like input
    assert out == BODIES and buffer.pending == 0


@pytest.mark.parametrize("bad", [-1, 1001, 2**31 - 1])
def test_a_bad_size_comes_after_the_frames_before_it(bad: int) -> None:
    buffer, out = FrameBuffer(1000), []
    with pytest.raises(FrameSizeError) as caught:
        buffer.drain(_frame(b"ok") + struct.pack(">i", bad) + b"never read", out)
    assert out == [b"ok"] and caught.value.size == bad
    with pytest.raises(FrameSizeError):  # and nothing is taken any more
        buffer.drain(_frame(b"later"), out)
    assert out == [b"ok"]


def test_a_bad_size_is_refused_as_soon_as_its_four_bytes_are_in() -> None:
    buffer, out = FrameBuffer(1000), []
    buffer.drain(b"\x7f\xff", out)
    with pytest.raises(FrameSizeError):
        buffer.drain(b"\xff\xff", out)


def test_a_big_frame_across_many_reads() -> None:
    body = bytes(range(256)) * 4000
    data = _frame(body)
    buffer, out = FrameBuffer(len(body)), []
    for i in range(0, len(data), 4096):
        buffer.drain(data[i:i + 4096], out)
        assert buffer.pending == (0 if out else min(i + 4096, len(data)))
    assert out == [body]


# --- held equal to the copying FrameBuffer it replaced ----------------------------------------------

_SIZE = struct.Struct(">i")


class CopyingFrameBuffer:
    """The FrameBuffer before bodies were preallocated (main 5b97767): growing buffer, copies out.

    The reference the new one is held equal to; it raises FrameSizeError as the new one does."""

    __slots__ = ("_buf", "_failed", "_limit", "_want")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()  # the start of a frame whose end has not arrived
        self._limit = limit
        self._want = 4  # bytes _buf must hold before a frame can complete
        self._failed: FrameSizeError | None = None

    @property
    def pending(self) -> int:
        """Bytes received but not yet handed out: a stalled partial frame shows here."""
        return len(self._buf)

    def drain(self, data: bytes, out: list[bytes]) -> None:
        """Take received bytes: every frame body they complete is appended to ``out``, in order.

        A frame size that is negative or over the limit raises FrameSizeError as soon as its four
        bytes are in, after the frames before it were appended; the buffer then refuses all input.
        Whole frames are sliced straight out of ``data``: bytes are only buffered (and copied) for
        a frame that spans reads, and its body is copied out of the buffer once (a produce of a
        megabyte spans many reads)."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        if buf:
            buf += data
            want = self._want
            if len(buf) < want:
                return
            if want > 4:  # a frame that spanned reads, its size checked: its body copied once
                with memoryview(buf) as view:
                    out.append(bytes(view[4:want]))
                    data = bytes(view[want:])
            else:
                data = bytes(buf)
            buf.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        pos, end, limit, unpack = 0, len(data), self._limit, _SIZE.unpack_from
        want = 4
        while end - pos >= 4:
            size = unpack(data, pos)[0]
            if size < 0 or size > limit:
                self._failed = FrameSizeError(size, limit)
                raise self._failed
            stop = pos + 4 + size
            if stop > end:
                want = 4 + size
                break
            out.append(data[pos + 4:stop])
            pos = stop
        if pos < end:
            buf += data[pos:] if pos else data
        self._want = want


def _run(buffer: FrameBuffer | CopyingFrameBuffer,
         chunks: list[bytes]) -> tuple[list[list[bytes]], int | None, int]:
    """The frames each read completes (as bytes), the bad size that stopped it, and what is pending."""
    per_read: list[list[bytes]] = []
    for chunk in chunks:
        out: list[ReceivedFrame] = []
        try:
            buffer.drain(chunk, out)  # type: ignore[arg-type]
        except FrameSizeError as error:
            per_read.append([bytes(frame) for frame in out])
            with pytest.raises(FrameSizeError):  # refused for good
                buffer.drain(b"\0\0\0\0", [])
            return per_read, error.size, buffer.pending
        per_read.append([bytes(frame) for frame in out])
    return per_read, None, buffer.pending


# sizes about each threshold; and bad ones, and huge ones only announced (their bodies never come)
_BAD = (-1, -(2**31), 2**31 - 1, PREALLOCATE_UP_TO + 1)
_sizes = st.one_of(st.integers(0, 40), st.integers(KEEP_FROM - 2, KEEP_FROM + 2), st.sampled_from(_BAD))


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """Frames with bodies of any bytes, sometimes a bad or short size among them, cut anywhere."""
    parts = []
    for size in draw(st.lists(_sizes, max_size=6)):
        length = size if 0 <= size <= KEEP_FROM + 2 else draw(st.integers(0, 40))  # too short: stays pending
        body = (draw(st.binary(max_size=40)) * (1 + length // 40))[:length].ljust(length, b"b")
        parts.append(_SIZE.pack(size) + body)
    stream = b"".join(parts) + draw(st.binary(max_size=6))  # maybe a cut-off size or body at the end
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    return stream, [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]


@settings(max_examples=400, deadline=None)
@given(streams(), st.sampled_from([None, 0, 5, KEEP_FROM]), st.sampled_from([40, KEEP_FROM + 2, 2**31 - 1]))
# a one-byte body whose read starts right after the size: it spans reads, and is kept
@example((b"\x00\x00\x00\x01b", [b"\x00\x00\x00\x01", b"b"]), 0, 40)
def test_frames_match_the_copying_buffer_over_any_chunking(stream: tuple[bytes, list[bytes]],
                                                           keep_from: int | None, limit: int) -> None:
    """Same frames after the same reads, same bad size at the same read, same bytes pending; a body
    is a bytearray exactly when it spanned reads and is at least ``keep_from`` bytes."""
    data, chunks = stream
    new = FrameBuffer(limit, keep_from)
    assert _run(new, chunks) == _run(CopyingFrameBuffer(limit), chunks)
    boundaries, at = set(), 0
    for chunk in chunks:
        at += len(chunk)
        boundaries.add(at)
    kinds, pos = FrameBuffer(limit, keep_from), 0
    for chunk in chunks:
        out: list[ReceivedFrame] = []
        try:
            kinds.drain(chunk, out)
        except FrameSizeError:
            break
        for frame in out:
            start, pos = pos + 4, pos + 4 + len(frame)
            # its body came in a later read than its start: a cut inside the body, or right
            # after the size (the body then starts in the next read; an empty body never does)
            spanned = any(start <= cut < pos for cut in boundaries)
            kept = spanned and keep_from is not None and len(frame) >= keep_from
            assert type(frame) is (bytearray if kept else bytes)
            assert frame == data[start:pos]


def test_a_kept_body_is_the_buffer_it_was_received_into() -> None:
    body = bytes(range(256)) * 100
    data = _frame(body) + _frame(b"next")
    buffer, out = FrameBuffer(len(body), keep_from=1000), []
    for i in range(0, len(data), 1000):
        buffer.drain(data[i:i + 1000], out)
    assert out == [body, b"next"] and type(out[0]) is bytearray and type(out[1]) is bytes


def test_a_body_over_the_preallocation_bound_grows_as_it_arrives() -> None:
    body = bytes(range(256)) * (PREALLOCATE_UP_TO // 256 + 1)
    data = _frame(body) + _frame(b"next")
    buffer, out = FrameBuffer(len(body)), []
    buffer.drain(data[:10], out)
    assert buffer.pending == 10  # what came, not the announced size, is held
    for i in range(10, len(data), 300_000):
        buffer.drain(data[i:i + 300_000], out)
    assert out == [body, b"next"] and type(out[0]) is bytearray and buffer.pending == 0


# --- buffered reads (asyncio.BufferedProtocol): get_buffer, then buffer_updated --------------------

def _run_buffered(buffer: FrameBuffer, chunks: list[bytes]) -> tuple[list[ReceivedFrame], int | None, int]:
    """``chunks`` as a socket would give them to recv_into: each is what the kernel holds when the
    socket turns readable, read in as many reads as the buffers lent take. The frames handed out,
    the bad size that stopped it, and what is pending."""
    frames: list[ReceivedFrame] = []
    for chunk in chunks:
        pos = 0
        while pos < len(chunk):
            view = buffer.get_buffer(-1)
            assert len(view) > 0
            n = min(len(view), len(chunk) - pos)
            view[:n] = chunk[pos:pos + n]
            pos += n
            out: list[ReceivedFrame] = []
            try:
                buffer.buffer_updated(n, out)
            except FrameSizeError as error:
                return frames + out, error.size, buffer.pending
            for frame in out:  # cut as the Produce fast path cuts it, while the reader holds ``view``
                if type(frame) is bytearray:
                    frame += b"resizable"  # BufferError if the lent view still pinned it
                    del frame[-9:]
            frames += out
    return frames, None, buffer.pending


@settings(max_examples=300, deadline=None)
@given(streams(), st.sampled_from([None, 0, 5, KEEP_FROM]), st.sampled_from([40, KEEP_FROM + 2, 2**31 - 1]))
def test_buffered_reads_hand_out_the_frames_drain_does(stream: tuple[bytes, list[bytes]],
                                                       keep_from: int | None, limit: int) -> None:
    """The same frames in the same order, the same bad size, the same bytes pending at the end; a
    body handed out as its bytearray is no longer pinned by the view lent for reading into it (the
    Produce fast path cuts it in place, inside buffer_updated: see _run_buffered)."""
    _, chunks = stream
    per_read, bad, pending = _run(FrameBuffer(limit, keep_from), chunks)
    frames, bad_buffered, pending_buffered = _run_buffered(FrameBuffer(limit, keep_from), chunks)
    assert [bytes(f) for f in frames] == [f for read in per_read for f in read]
    assert (bad_buffered, pending_buffered) == (bad, pending)
    assert all(keep_from is not None and len(f) >= keep_from for f in frames if type(f) is bytearray)


@settings(max_examples=100, deadline=None)
@given(streams(), streams())
def test_connections_sharing_a_read_buffer_get_their_own_frames(
        one: tuple[bytes, list[bytes]], other: tuple[bytes, list[bytes]]) -> None:
    """Two buffers sharing one read buffer (the broker's connections do), their reads interleaved:
    each hands out what it would alone."""
    shared = memoryview(bytearray(READ_SIZE))
    buffers = [FrameBuffer(2**31 - 1, KEEP_FROM, shared), FrameBuffer(2**31 - 1, KEEP_FROM, shared)]
    results: list[list[bytes]] = [[], []]
    chunks = [one[1], other[1]]
    for step in range(max(len(one[1]), len(other[1]))):
        for k in (0, 1):
            if step < len(chunks[k]):
                frames, _, _ = _run_buffered(buffers[k], [chunks[k][step]])
                results[k] += [bytes(f) for f in frames]
    for k in (0, 1):
        per_read, _, _ = _run(FrameBuffer(2**31 - 1, KEEP_FROM), chunks[k])
        assert results[k] == [f for read in per_read for f in read]


def test_a_large_body_is_read_straight_into_place() -> None:
    body = bytes(range(256)) * 4000  # a 1 MB Produce's worth: over READ_SIZE
    data = _frame(body) + _frame(b"next")
    buffer, out = FrameBuffer(len(body)), []
    view = buffer.get_buffer(-1)
    assert len(view) == READ_SIZE
    view[:READ_SIZE] = data[:READ_SIZE]
    buffer.buffer_updated(READ_SIZE, out)
    lent = buffer.get_buffer(-1)
    assert len(lent) == len(body) - (READ_SIZE - 4)  # exactly the rest of the body, nothing after it
    lent[:] = data[READ_SIZE:4 + len(body)]
    buffer.buffer_updated(len(lent), out)
    assert out == [body] and type(out[0]) is bytearray and buffer.pending == 0
    view = buffer.get_buffer(-1)
    view[:8] = _frame(b"next")
    buffer.buffer_updated(8, out)
    assert out == [body, b"next"]


# --- eager ----------------------------------------------------------------------------------------


async def _no_wait(value: int) -> int:
    return value * 2


def test_a_coroutine_that_does_not_wait_finishes_in_place() -> None:
    assert eager.start(_no_wait(21)) == (True, 42)


def test_an_exception_before_the_first_wait_is_raised_in_place() -> None:
    async def fails() -> None:
        raise ValueError("at once")

    with pytest.raises(ValueError, match="at once"):
        eager.start(fails())


def test_a_coroutine_that_waits_is_finished_by_the_task_that_awaits_the_rest() -> None:
    steps: list[str] = []

    async def waits(future: asyncio.Future[int]) -> int:
        steps.append("before")
        got = await future
        steps.append("after")
        await asyncio.sleep(0)
        return got + 1

    async def main() -> int:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        done, rest = eager.start(waits(future))
        assert not done and steps == ["before"]
        loop.call_later(0.01, future.set_result, 41)
        return await asyncio.create_task(_awaiting(rest))

    assert asyncio.run(main()) == 42
    assert steps == ["before", "after"]


async def _awaiting(awaitable: object) -> int:
    return await awaitable  # type: ignore[no-any-return,misc]


def test_cancelling_the_task_cancels_the_coroutine_it_finishes() -> None:
    cleaned: list[bool] = []

    async def waits_forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(True)

    async def main() -> None:
        done, rest = eager.start(waits_forever())
        assert not done
        task = asyncio.create_task(_awaiting(rest))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == [True]


def test_an_exception_after_the_wait_reaches_the_awaiting_task() -> None:
    async def fails_later() -> None:
        await asyncio.sleep(0.01)
        raise KeyError("later")

    async def main() -> None:
        done, rest = eager.start(fails_later())
        assert not done
        with pytest.raises(KeyError, match="later"):
            await _awaiting(rest)

    asyncio.run(main())
