"""The broker's frame splitting, which now lives in the protocol layer (:mod:`kafkapy.protocol.framing`)
so that the sans-I/O connection objects (:mod:`kafkapy.protocol.connection`) share it; the server's
modules keep importing these names from here."""

from kafkapy.protocol.framing import (
    KEEP_FROM,
    PREALLOCATE_UP_TO,
    READ_SIZE,
    FrameBuffer,
    FrameSizeError,
    ReceivedFrame,
)

__all__ = ["KEEP_FROM", "PREALLOCATE_UP_TO", "READ_SIZE", "FrameBuffer", "FrameSizeError", "ReceivedFrame"]
