"""CaptureObserver: every frame the broker sees, written to a pcap file that Wireshark opens.

Enable it with ``observer.class.names=kafkapy.observers.CaptureObserver`` and
``capture.path=/some/where.pcap``. The path may hold ``{pid}`` and
``{instance}`` (a per-process counter of capture observers), so several
brokers started from one config write one file each; two live observers
given the same file are refused rather than left to overwrite each other.
When ``capture.path`` is not among the observer's configs, the environment
variable ``KAFKAPY_CAPTURE_PATH`` is used (handy with ``kafkapy serve``).

Theory of operation
-------------------
The broker hands over frame bodies through the kafkapy extension
``record_frame(connection, from_client, frame)``, not TCP segments. Each
connection becomes a synthetic TCP flow between its real client and broker
addresses (:class:`kafkapy.capture.writer.TcpFlow`): a handshake when its
first frame is seen, then each frame, size prefix restored, as segments
whose sequence and acknowledgement numbers continue per direction, so
tshark and :func:`kafkapy.capture.pairing.read_exchanges` reassemble the
streams offline. Timestamps are when the dispatcher saw a frame (a request
once its turn came, a response once encoded), not wire times. Flows still
open at ``close`` get a FIN exchange; a connection that closed earlier has
none (observers hear nothing of closes), which readers treat as a capture
that ended mid-stream.

What the capture cannot show: requests the dispatcher answers without
routing (unknown API keys and versions) reach observers without frames, so
they are missing, and so are bytes never framed (a frame over
socket.request.max.bytes).

Calls come from the broker's loop thread; ``close`` and ``flush`` may come
from any thread, so one lock serialises the writes. Segments are cut at
65,495 bytes, the most a 16-bit IPv4 total length allows after 40 bytes of
IPv4 and TCP headers, so even a large Fetch response is a few packets.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import struct
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from kafkapy.capture.writer import PcapWriter, TcpFlow
from kafkapy.server.config import ConfigKey

if TYPE_CHECKING:
    from kafkapy.server.connection import ConnectionInfo

__all__ = ["CAPTURE_PATH", "CAPTURE_PATH_ENV", "CaptureObserver"]

CAPTURE_PATH = "capture.path"
CAPTURE_PATH_ENV = "KAFKAPY_CAPTURE_PATH"
SEGMENT_BYTES = 65_495
_SIZE = struct.Struct(">i")
_instances = itertools.count(1)
_flows = itertools.count(1)


class CaptureObserver:
    """Writes the frames of every connection to one pcap file per observer instance."""

    # Declared as modules declare theirs (Module.config_keys), for the broker to validate and document.
    config_keys: ClassVar[tuple[ConfigKey, ...]] = (
        ConfigKey(CAPTURE_PATH, "string", None,
                  "pcap file CaptureObserver writes; {pid} and {instance} are replaced (a file per broker)."),
    )
    _paths_in_use: ClassVar[set[str]] = set()
    _paths_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.path: Path | None = None
        self._writer: PcapWriter | None = None
        self._file: BinaryIO | None = None
        self._lock = threading.Lock()
        self._flows: weakref.WeakKeyDictionary[ConnectionInfo, TcpFlow] = weakref.WeakKeyDictionary()
        self.frames = 0  # frames written, for whoever wants to know the capture is alive

    # --- KIP-388 ---------------------------------------------------------------------------

    def configure(self, configs: Mapping[str, Any]) -> None:
        raw = configs.get(CAPTURE_PATH) or os.environ.get(CAPTURE_PATH_ENV)
        if not raw:
            raise ValueError(f"{CAPTURE_PATH} is not set (nor ${CAPTURE_PATH_ENV}): "
                             f"CaptureObserver needs a file to write")
        text = str(raw).replace("{pid}", str(os.getpid())).replace("{instance}", str(next(_instances)))
        path = Path(text).expanduser().resolve()
        with self._paths_lock:
            if str(path) in self._paths_in_use:
                raise ValueError(f"{CAPTURE_PATH} {str(path)!r} is already written by another broker "
                                 f"in this process; put {{instance}} or {{pid}} in the path")
            self._paths_in_use.add(str(path))
        try:
            self._file = open(path, "wb")  # ours, not the writer's, so flush() can reach it
            self._writer = PcapWriter(self._file)
        except OSError as exc:
            self._release(path)
            raise ValueError(f"cannot write {CAPTURE_PATH} {str(path)!r}: {exc.strerror or exc}") from None
        self.path = path

    def record_request(self, request: Mapping[str, Any] | None, client_address: str, principal: str,
                       api_key: int, api_version: int, correlation_id: int) -> None:
        pass  # frames come through record_frame

    def record_response(self, response: Mapping[str, Any] | None, api_version: int,
                        correlation_id: int) -> None:
        pass

    def record_frame(self, connection: ConnectionInfo, from_client: bool, frame: bytes) -> None:
        ts = time.time()
        with self._lock:
            writer = self._writer
            if writer is None:
                return
            flow = self._flows.get(connection)
            packets: list[tuple[float, bytes]] = []
            if flow is None:
                flow = self._flows[connection] = _flow(connection)
                packets = flow.handshake(ts)
            packets += flow.send(from_client, _SIZE.pack(len(frame)) + frame, ts)
            for when, data in packets:
                writer.write(data, when)
            self.frames += 1

    def close(self, timeout: float) -> None:
        with self._lock:
            writer, self._writer = self._writer, None
            if writer is None:
                return
            ts = time.time()
            try:
                for flow in list(self._flows.values()):
                    for when, data in flow.close(ts):
                        writer.write(data, when)
            finally:
                self._flows.clear()
                writer.close()
                if self._file is not None:
                    self._file.close()
                    self._file = None
                if self.path is not None:
                    self._release(self.path)

    # --- beyond the KIP --------------------------------------------------------------------

    def flush(self) -> None:
        """Push what is written so far to the file, so it can be read while the broker runs."""
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def _release(self, path: Path) -> None:
        with self._paths_lock:
            self._paths_in_use.discard(str(path))


def _flow(connection: ConnectionInfo) -> TcpFlow:
    client, server = _endpoint(connection.client_address), _endpoint(connection.broker_address)
    if ipaddress.ip_address(client[0]).version != ipaddress.ip_address(server[0]).version:
        # A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d on one side only, at worst.
        client, server = _as_ipv6(client), _as_ipv6(server)
    n = next(_flows)
    # Distinct initial sequence numbers per flow, so a reused client port is a new stream to readers.
    return TcpFlow(client, server, client_isn=n * 1_000_003, server_isn=n * 2_000_003 + 7,
                   mss=SEGMENT_BYTES)


def _endpoint(address: tuple[str, int]) -> tuple[str, int]:
    host = (address[0] or "0.0.0.0").split("%", 1)[0]  # drop an IPv6 zone (fe80::1%lo)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "0.0.0.0", address[1]  # not an IP socket: keep the frames, lose the address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped), address[1]
    return str(ip), address[1]


def _as_ipv6(address: tuple[str, int]) -> tuple[str, int]:
    ip = ipaddress.ip_address(address[0])
    return (f"::ffff:{ip}" if ip.version == 4 else str(ip)), address[1]
