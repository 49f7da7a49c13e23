"""Decoding Kafka traffic from packet captures, layer by layer.

    pcap      capture file  -> Packet        (pcap and pcapng, streamed)
    packets   Packet        -> TcpSegment    (Ethernet/SLL/loopback/raw, IPv4/IPv6, TCP)
    tcp       TcpSegment    -> stream events (reassembly per connection and direction)
    frames    stream events -> Frame         (Kafka size-prefixed frames, resync, port learning)
    pairing   Frame         -> Exchange      (request + response, decoded by kafkapy.protocol)
    writer    payload bytes -> pcap file     (synthetic Ethernet/IP/TCP framing)

Each layer is a class fed one item at a time, so a capture of any size is
decoded in memory bounded by its open connections, not by the file.
"""

from kafkapy.capture.errors import CaptureError
from kafkapy.capture.frames import (
    ConnectionClassified,
    Frame,
    FrameEvent,
    FrameReader,
    KafkaFramer,
    Unframed,
    read_frames,
)
from kafkapy.capture.packets import PacketDecoder, TcpSegment
from kafkapy.capture.pairing import Exchange, Pairer, read_exchanges
from kafkapy.capture.pcap import CaptureReader, Packet, read_packets
from kafkapy.capture.tcp import (
    Connection,
    ConnectionClosed,
    ConnectionOpened,
    Endpoint,
    StreamData,
    StreamEnd,
    StreamGap,
    StreamOverlap,
    TcpEvent,
    TcpReassembler,
)
from kafkapy.capture.writer import PcapWriter, TcpFlow

__all__ = [
    "CaptureError",
    "CaptureReader",
    "Connection",
    "ConnectionClassified",
    "ConnectionClosed",
    "ConnectionOpened",
    "Endpoint",
    "Exchange",
    "Frame",
    "FrameEvent",
    "FrameReader",
    "KafkaFramer",
    "Packet",
    "PacketDecoder",
    "Pairer",
    "PcapWriter",
    "StreamData",
    "StreamEnd",
    "StreamGap",
    "StreamOverlap",
    "TcpEvent",
    "TcpFlow",
    "TcpReassembler",
    "TcpSegment",
    "Unframed",
    "read_exchanges",
    "read_frames",
    "read_packets",
]
