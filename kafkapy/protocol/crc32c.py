"""CRC-32C (Castagnoli): the checksum of v2 record batches and of Kafka's snapshot files.

google-crc32c is the C implementation (its import touches no I/O module, the crc32c package's
does), but its Python entry points take only ``bytes``: a view into a request, or the bytearray
a Produce batch is stamped in, would have to be copied first. For a 1 MB batch that copy is a
fresh megabyte from the allocator, page faults and all, and it cost several times the checksum
itself on the broker's Produce path (measured: about 400 µs of copy against 80 µs of CRC).

So a writable buffer (a bytearray, or a view of one) of at least ``ZERO_COPY_MIN`` bytes goes
to the library's own C function, ``crc32c_extend(crc, pointer, length)``, through ctypes, with
no copy: ctypes can point at a writable buffer in place (``from_buffer``), not at a read-only
one. The call passes the address of a one-byte ctypes object laid over the buffer's start: making
an array type of the buffer's length instead (``c_char * n``) is a new ctypes type per length,
which cost about 8 µs a call. Anything else, and every buffer when the C symbol cannot be found,
takes the plain path: ``bytes`` as they are, other buffers copied once. Small buffers take it
too, because a ctypes call costs more than copying a few kilobytes. tests/protocol/test_crc32c.py
holds the two paths equal.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import google_crc32c

__all__ = ["ZERO_COPY_MIN", "crc32c", "crc32c_copying"]

# Below this a copy plus the bytes entry point beats a ctypes call (about 1 µs); measured here.
ZERO_COPY_MIN = 16 * 1024

Buffer = bytes | bytearray | memoryview


def crc32c_copying(data: Buffer) -> int:
    """The plain path: google-crc32c's bytes entry point, copying anything that is not bytes."""
    return int(google_crc32c.value(data if isinstance(data, bytes) else bytes(data)))


def _c_extend() -> Callable[[int, int, int], int] | None:
    """``crc32c_extend`` from the library google-crc32c's extension links, or None."""
    try:
        from google_crc32c import _crc32c

        # dlsym on the extension's handle also searches the libraries it was linked with.
        function = ctypes.CDLL(_crc32c.__file__).crc32c_extend
    except (ImportError, OSError, AttributeError):
        return None
    function.restype = ctypes.c_uint32
    function.argtypes = (ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t)
    if function(0, ctypes.create_string_buffer(b"123456789", 9), 9) != 0xE3069283:  # the check value
        return None
    return function


_extend = _c_extend()
_first_byte = ctypes.c_char.from_buffer
_address = ctypes.addressof


def crc32c(data: Buffer) -> int:
    """CRC-32C of ``data``; a large writable buffer is read in place."""
    if _extend is not None and not isinstance(data, bytes):
        view = data if isinstance(data, memoryview) else memoryview(data)
        if not view.readonly and view.nbytes >= ZERO_COPY_MIN and view.c_contiguous:
            if view.format != "B" or view.ndim != 1:
                view = view.cast("B")
            anchor = _first_byte(view)  # holds the buffer exported (unmovable) until the call returns
            return int(_extend(0, _address(anchor), view.nbytes))
    return int(google_crc32c.value(data if isinstance(data, bytes) else bytes(data)))
