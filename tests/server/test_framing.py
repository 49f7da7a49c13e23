"""The sans-I/O pieces under a connection: frame splitting and coroutines started in place."""

from __future__ import annotations

import asyncio
import struct

import pytest

from kafkapy.server import eager
from kafkapy.server.framing import FrameBuffer, FrameSizeError


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
