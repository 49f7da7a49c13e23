"""TLS decryption between TCP reassembly and Kafka framing, with the clients' key log.

Theory of operation
-------------------
The layer sits on the TCP events (:mod:`kafkapy.capture.tcp`) and hands the framer the same
events, with a TLS connection's ciphertext replaced by its plaintext: each direction's
application data, at offsets counted from its first plaintext byte. So the framer, pairing and
rows see a TLS connection as if it had been plaintext.

A connection is judged at its first byte of data:

    UNDECIDED  nothing seen yet                   -> TLS (a ClientHello record at offset 0)
                                                  -> PLAIN (anything else, a mid-stream start)
    PLAIN      not TLS, or joined mid-stream: every event passes unchanged (the framer says
               "TLS, no keys" of a TLS stream joined after its handshake, on a Kafka port)
    TLS        records parsed per direction; plaintext handed on once a record authenticates
    OPAQUE     TLS that cannot be decrypted: one TlsNote row says why (when the key log knew the
               connection or its port is a Kafka port), its data goes nowhere

Within TLS, the handshake gives the client random (ClientHello), the version and suite
(ServerHello; its supported_versions extension says TLS 1.3), and the key log the secrets. Each
direction then opens its records in order (:class:`~kafkapy.capture.tls_keys.RecordKeys` keeps
the sequence number): TLS 1.2 from that direction's ChangeCipherSpec on; TLS 1.3 every
application_data record, under the handshake secret until the direction's Finished, then under
traffic secret 0, replaced at each KeyUpdate. Alerts and post-handshake messages are consumed.

Until a record authenticates, the connection's events are held (at most ``MAX_HELD`` bytes):
a key log of another run decrypts nothing, and the connection is then OPAQUE with nothing of it
handed on. After one has, bytes the capture lost among a direction's application records cost
only those records: the nonce of every later record depends on how many were lost, so the next
whole record is found by trying the sequence numbers the lost bytes allow (an AEAD tag does not
authenticate under a wrong one), and the framer is told of the plaintext lost, as for a gap in
a plaintext stream (exact when the records lost held application data without padding, as every
stack read here writes them). A record that does not open, or loss during the handshake, ends
the direction: the framer is told of an unknown gap there, and a TlsNote row says where.
"""

from __future__ import annotations

from collections.abc import Container

from kafkapy.capture.events import TlsNote
from kafkapy.capture.keylog import KeyLog
from kafkapy.capture.tcp import (
    Connection,
    ConnectionClosed,
    ConnectionOpened,
    StreamData,
    StreamEnd,
    StreamGap,
    TcpEvent,
)
from kafkapy.capture.tls_keys import (
    SUITES,
    TLS12,
    TLS13,
    CipherSuite,
    RecordKeys,
    tls12_keys,
    tls13_keys,
    tls13_next_secret,
)

__all__ = ["MAX_HELD", "TlsDecryptor"]

#: Bytes of a TLS connection held before any record has authenticated. A handshake with a
#: certificate chain is a few KiB; 1 MiB is room for several long chains and a first request.
MAX_HELD = 1 << 20
# RFC 8446 section 5.2 (and RFC 5246 section 6.2.3): a protected record is at most 2**14 + 256
# bytes in TLS 1.3 and 2**14 + 2048 in TLS 1.2.
_MAX_RECORD = (1 << 14) + 2048
# RFC 8446 section 4.1.3: the random of a ServerHello that is a HelloRetryRequest.
_HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
_CHANGE_CIPHER_SPEC, _ALERT, _HANDSHAKE, _APPLICATION_DATA = 20, 21, 22, 23
_CLIENT_HELLO, _SERVER_HELLO, _FINISHED, _KEY_UPDATE = 1, 2, 20, 24
_SUPPORTED_VERSIONS = 43  # the extension's number (RFC 8446 section 4.2)
_MAX_HANDSHAKE_MESSAGE = 1 << 18
# After a gap, sequence numbers tried per candidate record (from the fewest records the lost bytes
# can hold), and bytes searched for one that opens: four records' worth, since a record that
# opens follows any lost one within a record's length (or the bytes after it were lost too).
_MAX_RESYNC_TRIES = 4096
_MAX_RESYNC_BYTES = 4 * (5 + (1 << 14) + 2048)  # a certificate chain of 256 KiB is already extravagant

_UNDECIDED, _PLAIN, _TLS, _OPAQUE = range(4)
# the key log's labels a TLS 1.3 connection needs (RFC 8446 section 7.1's secrets, as NSS names them)
_TLS13_LABELS = ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                 "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")

class _Half:
    """One direction of a TLS connection."""

    __slots__ = ("buf", "ccs", "handshake", "keys", "lost", "offset", "plain_offset", "resync_from",
                 "resync_pos", "resync_seq", "secret")

    def __init__(self) -> None:
        self.buf = bytearray()  # ciphertext not yet a whole record
        self.offset = 0  # stream offset of buf[0]
        self.plain_offset = 0  # plaintext handed on so far
        self.keys: RecordKeys | None = None  # opening this direction's protected records
        self.ccs = False  # TLS 1.2: ChangeCipherSpec seen, later records protected
        self.handshake = bytearray()  # handshake message bytes not yet a whole message
        self.secret: bytes | None = None  # TLS 1.3: the traffic secret a KeyUpdate derives from
        self.lost = False
        self.resync_from: int | None = None  # after a gap: the stream offset where records were lost
        self.resync_seq = 0  # ... and the sequence number of the first lost
        self.resync_pos = 0  # buf before this holds no record that opens


class _Tls:
    """A connection's TLS state."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.state = _UNDECIDED
        self.halves = (_Half(), _Half())
        self.held: list[TcpEvent] = []
        self.held_bytes = 0
        self.opening = bytearray()  # the connection's first bytes, while UNDECIDED
        self.opening_side: int | None = None
        self.out: list[TcpEvent | TlsNote] = []  # translated events, handed on once proven
        self.proven = False
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.version = 0
        self.suite: CipherSuite | None = None
        self.secrets: dict[str, bytes] | None = None
        self.app_secrets: tuple[bytes, bytes] | None = None  # TLS 1.3: (client, server) secret 0


def _short(random: bytes | None) -> str:
    return "?" if random is None else random.hex()


def _direction(conn: Connection, side: int) -> str:
    return "client" if conn.from_client(side) else "server"


class TlsDecryptor:
    """Feeds TCP events; returns TCP events with TLS connections' plaintext, and TlsNotes.

    ``kafka_ports`` (the framer's live set) decides whether a TLS connection the key log does not
    know is worth a row: on a Kafka port it is Kafka's, elsewhere most likely some other service.
    """

    def __init__(self, keylog: KeyLog, kafka_ports: Container[int]) -> None:
        self.keylog = keylog
        self.kafka_ports = kafka_ports
        self._conns: dict[int, _Tls] = {}

    def feed(self, event: TcpEvent) -> list[TcpEvent | TlsNote]:
        if type(event) is ConnectionOpened:
            self._conns[event.conn.id] = _Tls(event.conn)
            return [event]
        c = self._conns.get(event.conn.id)
        if c is None:
            return [event]
        if type(event) is ConnectionClosed:
            del self._conns[event.conn.id]
        state = c.state
        if state == _PLAIN:
            return [event]
        if state == _OPAQUE:
            return [event] if type(event) is ConnectionClosed else []
        if state == _UNDECIDED:
            return self._judge(c, event)
        return self._tls_event(c, event)

    # -- judging a connection ----------------------------------------------------------------

    def _judge(self, c: _Tls, event: TcpEvent) -> list[TcpEvent | TlsNote]:
        """TLS if the first bytes of the connection are a ClientHello's record; the first six tell
        (content type, version, length, handshake type), which may come in several pieces."""
        c.held.append(event)
        if type(event) is StreamData and event.offset == len(c.opening) and len(c.opening) < 6:
            c.opening += event.data[: 6 - len(c.opening)]
            c.opening_side = event.side if c.opening_side is None else c.opening_side
            head = c.opening
            maybe = event.side == c.opening_side and head[0] == _HANDSHAKE and (len(head) < 2 or head[1] == 3)
            if maybe and len(head) < 6:
                return []  # wait for the rest of the first six bytes
            if maybe and head[5] == _CLIENT_HELLO:
                if not c.conn.from_client(event.side):
                    c.conn.set_client(event.side, "tls")
                c.state = _TLS
                held, c.held = c.held, []
                out: list[TcpEvent | TlsNote] = []
                for waiting in held:
                    out.extend(self._tls_event(c, waiting))
                return out
        c.state = _PLAIN
        held, c.held = c.held, []
        return list(held)

    # -- a TLS connection --------------------------------------------------------------------

    def _tls_event(self, c: _Tls, event: TcpEvent) -> list[TcpEvent | TlsNote]:
        if not c.proven:
            c.held.append(event)
            if type(event) is StreamData:
                c.held_bytes += len(event.data)
        if type(event) is StreamData:
            self._data(c, event.side, event.ts, event.data)
        elif type(event) is StreamGap:
            self._gap(c, event.side, event.ts, event.offset, event.length)
        elif type(event) is StreamEnd:
            h = c.halves[event.side]
            c.out.append(StreamEnd(c.conn, event.side, event.ts, h.plain_offset, event.reason))
        elif type(event) is ConnectionClosed:
            c.out.append(event)
        # a StreamOverlap is about ciphertext: the framer has no use for it
        if c.state == _OPAQUE:
            return self._opaque_out(c, event)
        if not c.proven:
            if type(event) is ConnectionClosed or c.held_bytes > MAX_HELD:
                why = ("the connection closed before any record decrypted" if type(event) is ConnectionClosed
                       else f"no record decrypted in its first {MAX_HELD} bytes")
                self._opaque(c, event.ts, why)
                return self._opaque_out(c, event)
            return []
        c.held.clear()
        out, c.out = c.out, []
        return out

    def _opaque(self, c: _Tls, ts: float, why: str) -> None:
        """No keys for this connection: one row says so, when the connection is worth one."""
        if c.state == _OPAQUE:
            return
        c.state = _OPAQUE
        known = c.secrets is not None
        if known or c.conn.server.port in self.kafka_ports:
            c.out = [TlsNote(c.conn, None, ts, "undecodable", f"TLS, no keys: {why}")]
        else:
            c.out = []

    def _opaque_out(self, c: _Tls, event: TcpEvent) -> list[TcpEvent | TlsNote]:
        out = c.out
        c.out, c.held = [], []
        if type(event) is ConnectionClosed and event not in out:
            out.append(event)
        return out

    def _lose(self, c: _Tls, side: int, ts: float, why: str) -> None:
        """One direction can be read no further (a record lost or damaged)."""
        h = c.halves[side]
        if h.lost or c.state == _OPAQUE:
            return
        if not c.proven:
            self._opaque(c, ts, why)
            return
        h.lost = True
        h.buf.clear()
        c.out.append(StreamGap(c.conn, side, ts, h.plain_offset, None, "lost"))
        c.out.append(TlsNote(c.conn, side, ts, "gap",
                             f"TLS: {why}; the rest of the {_direction(c.conn, side)} stream cannot be "
                             "decrypted (each record's nonce counts the ones before it)"))

    def _gap(self, c: _Tls, side: int, ts: float, offset: int, length: int | None) -> None:
        """Bytes the capture lost: in a direction reading application records, the next record is
        looked for after them (see _resync); anywhere else, the direction ends."""
        h = c.halves[side]
        if h.lost or c.state != _TLS:
            return
        reading = h.ccs if c.version == TLS12 else h.secret is not None
        if not (c.proven and reading and length is not None and h.keys is not None):
            self._lose(c, side, ts, f"the capture lost {length or 'some'} bytes of the "
                       f"{_direction(c.conn, side)} stream's TLS records at offset {offset}")
            return
        if h.resync_from is None:
            h.resync_from = h.offset  # the first record lost starts where the bytes held start
            h.resync_seq = h.keys.seq
        h.buf.clear()
        h.offset = offset + length

    def _resync(self, c: _Tls, side: int, ts: float) -> bool:
        """After a gap: find the first whole record that opens with a sequence number the lost
        bytes allow, report the plaintext lost (records lost times their overhead less than the
        bytes lost) as a gap to the framer, and go on from it. False: not found yet."""
        h = c.halves[side]
        keys, buf = h.keys, h.buf
        assert keys is not None and h.resync_from is not None
        types = (_APPLICATION_DATA,) if c.version == TLS13 else (_ALERT, _HANDSHAKE, _APPLICATION_DATA)
        pos = h.resync_pos
        while len(buf) - pos >= 5:
            length = int.from_bytes(buf[pos + 3 : pos + 5], "big")
            header = buf[pos] in types and buf[pos + 1] == 3 and buf[pos + 2] == 3
            if not (header and 0 < length <= _MAX_RECORD):
                pos += 1
                continue
            if len(buf) - pos < 5 + length:
                break  # a candidate not yet whole: wait for its end
            span = h.offset + pos - h.resync_from  # ciphertext of the records lost
            fewest = -(-span // (5 + _MAX_RECORD))
            most = min(span // keys.overhead, fewest + _MAX_RESYNC_TRIES)
            found = keys.open_from(h.resync_seq + fewest, h.resync_seq + most, buf[pos],
                                   (buf[pos + 1] << 8) | buf[pos + 2], bytes(buf[pos + 5 : pos + 5 + length]))
            if found is None:
                pos += 1
                continue
            seq, (ctype, plain) = found
            lost = span - (seq - h.resync_seq) * keys.overhead
            if lost:  # below zero: records not as assumed (padded, or not data): a gap of unknown size
                c.out.append(StreamGap(c.conn, side, ts, h.plain_offset, lost if lost > 0 else None, "lost"))
                h.plain_offset += max(lost, 0)
            h.resync_from, h.resync_pos = None, 0
            del buf[: pos + 5 + length]
            h.offset += pos + 5 + length
            self._record(c, side, ts, ctype, plain)
            return True
        h.resync_pos = pos
        if len(buf) > _MAX_RESYNC_BYTES:
            self._lose(c, side, ts, f"no record after the bytes the capture lost of the "
                       f"{_direction(c.conn, side)} stream (at offset {h.resync_from}) decrypts")
        return False

    def _data(self, c: _Tls, side: int, ts: float, data: bytes) -> None:
        h = c.halves[side]
        if h.lost:
            return
        h.buf += data
        self._pump(c, side, ts)

    def _pump(self, c: _Tls, side: int, ts: float) -> None:
        """Open the whole records of one direction, as far as the keys known allow."""
        h = c.halves[side]
        if h.resync_from is not None and not self._resync(c, side, ts):
            return
        buf = h.buf
        pos = 0
        while len(buf) - pos >= 5 and not h.lost and c.state == _TLS:
            ctype, major, minor = buf[pos], buf[pos + 1], buf[pos + 2]
            length = int.from_bytes(buf[pos + 3 : pos + 5], "big")
            if ctype not in (20, 21, 22, 23) or major != 3 or not 0 < length <= _MAX_RECORD:
                self._lose(c, side, ts, f"the bytes at offset {h.offset + pos} of the "
                           f"{_direction(c.conn, side)} stream are not a TLS record")
                break
            if len(buf) - pos < 5 + length:
                break
            protected = h.ccs if c.version == TLS12 else (ctype == _APPLICATION_DATA)
            if protected and h.keys is None:
                if c.suite is None:
                    break  # the peer's ServerHello is not read yet: wait for it
                self._lose(c, side, ts, f"a protected record of the {_direction(c.conn, side)} "
                           "stream before its keys")
                break
            fragment = bytes(buf[pos + 5 : pos + 5 + length])
            version = (major << 8) | minor
            pos += 5 + length
            if protected:
                assert h.keys is not None
                opened = h.keys.open(ctype, version, fragment)
                if opened is None:
                    self._lose(c, side, ts, self._why_not_opened(c, side, h))
                    break
                c.proven = True
                ctype, fragment = opened
            self._record(c, side, ts, ctype, fragment)
        if not h.lost:
            del buf[:pos]
            h.offset += pos

    def _why_not_opened(self, c: _Tls, side: int, h: _Half) -> str:
        assert h.keys is not None
        where = f"record {h.keys.seq} of the {_direction(c.conn, side)} stream"
        if c.proven:
            return f"{where} does not decrypt (damaged, or a record before it lost)"
        return (f"the key log's secrets for client random {_short(c.client_random)} do not decrypt "
                f"{where} (a key log of another run?)")

    def _record(self, c: _Tls, side: int, ts: float, ctype: int, fragment: bytes) -> None:
        h = c.halves[side]
        if ctype == _APPLICATION_DATA:
            if fragment and h.keys is not None:
                c.out.append(StreamData(c.conn, side, ts, h.plain_offset, fragment))
                h.plain_offset += len(fragment)
        elif ctype == _HANDSHAKE:
            h.handshake += fragment
            self._messages(c, side, ts)
        elif ctype == _CHANGE_CIPHER_SPEC and c.version == TLS12:
            h.ccs = True
        # alerts (close_notify, or a refusal) and TLS 1.3's compatibility ChangeCipherSpec: nothing

    def _messages(self, c: _Tls, side: int, ts: float) -> None:
        h = c.halves[side]
        buf = h.handshake
        while len(buf) >= 4:
            length = int.from_bytes(buf[1:4], "big")
            if length > _MAX_HANDSHAKE_MESSAGE:
                self._lose(c, side, ts, f"a handshake message of {length} bytes")
                return
            if len(buf) < 4 + length:
                return
            kind, body = buf[0], bytes(buf[4 : 4 + length])
            del buf[: 4 + length]
            self._message(c, side, ts, kind, body)
            if c.state != _TLS or h.lost:
                return

    def _message(self, c: _Tls, side: int, ts: float, kind: int, body: bytes) -> None:
        from_client = c.conn.from_client(side)
        if kind == _CLIENT_HELLO and from_client and len(body) >= 34:
            c.client_random = body[2:34]
        elif kind == _SERVER_HELLO and not from_client and c.suite is None:
            self._server_hello(c, ts, body)
            if c.state == _TLS and c.suite is not None:
                self._pump(c, c.conn.client_side, ts)  # client records that waited for the keys
        elif c.version == TLS13 and kind == _FINISHED and c.app_secrets is not None:
            secret = c.app_secrets[0 if from_client else 1]
            self._rekey(c, side, secret)
        elif c.version == TLS13 and kind == _KEY_UPDATE and c.halves[side].secret is not None:
            assert c.suite is not None
            current = c.halves[side].secret
            assert current is not None
            self._rekey(c, side, tls13_next_secret(c.suite, current))

    def _rekey(self, c: _Tls, side: int, secret: bytes) -> None:
        assert c.suite is not None
        h = c.halves[side]
        h.secret = secret
        h.keys = tls13_keys(c.suite, secret)

    def _server_hello(self, c: _Tls, ts: float, body: bytes) -> None:
        parsed = _parse_server_hello(body)
        if parsed is None:
            self._opaque(c, ts, "its ServerHello does not parse")
            return
        server_random, suite_code, version = parsed
        if server_random == _HRR_RANDOM:
            return  # a HelloRetryRequest: the real ServerHello follows the second ClientHello
        c.server_random = server_random
        if c.client_random is None:
            self._opaque(c, ts, "the capture does not have its ClientHello")
            return
        labels = ("CLIENT_RANDOM",) if version == TLS12 else _TLS13_LABELS
        c.secrets = self.keylog.secrets(c.client_random, labels)
        suite = SUITES.get(suite_code)
        if version not in (TLS12, TLS13):
            self._opaque(c, ts, f"TLS version 0x{version:04x} is not decrypted (TLS 1.2 and 1.3 are)")
            return
        if suite is None:
            self._opaque(c, ts, f"cipher suite 0x{suite_code:04x} is not decrypted (AES-GCM and "
                         "ChaCha20-Poly1305 suites are)")
            return
        if c.secrets is None:
            self._opaque(c, ts, f"the key log has no secrets for client random {_short(c.client_random)}")
            return
        c.version, c.suite = version, suite
        client, server = c.halves[c.conn.client_side], c.halves[1 - c.conn.client_side]
        if version == TLS12:
            master = c.secrets.get("CLIENT_RANDOM")
            if master is None:
                self._opaque(c, ts, f"the key log has no CLIENT_RANDOM line (TLS 1.2's master secret) "
                             f"for client random {_short(c.client_random)}")
                return
            client.keys, server.keys = tls12_keys(suite, master, c.client_random, server_random)
            return
        missing = [label for label in _TLS13_LABELS if label not in c.secrets]
        if missing:
            self._opaque(c, ts, f"the key log lacks {', '.join(missing)} for client random "
                         f"{_short(c.client_random)} (TLS 1.3)")
            return
        client_handshake, server_handshake, client_traffic, server_traffic = _TLS13_LABELS
        client.keys = tls13_keys(suite, c.secrets[client_handshake])
        server.keys = tls13_keys(suite, c.secrets[server_handshake])
        c.app_secrets = (c.secrets[client_traffic], c.secrets[server_traffic])


def _parse_server_hello(body: bytes) -> tuple[bytes, int, int] | None:
    """(server random, cipher suite, negotiated version) of a ServerHello body (RFC 8446 section
    4.1.3, RFC 5246 section 7.4.1.3); the version is supported_versions' when it is there."""
    if len(body) < 35:
        return None
    version = int.from_bytes(body[0:2], "big")
    random = body[2:34]
    pos = 35 + body[34]
    if len(body) < pos + 3:
        return None
    suite = int.from_bytes(body[pos : pos + 2], "big")
    pos += 3  # the suite, then legacy_compression_method
    if len(body) >= pos + 2:
        end = min(len(body), pos + 2 + int.from_bytes(body[pos : pos + 2], "big"))
        pos += 2
        while pos + 4 <= end:
            kind = int.from_bytes(body[pos : pos + 2], "big")
            size = int.from_bytes(body[pos + 2 : pos + 4], "big")
            if kind == _SUPPORTED_VERSIONS and size == 2 and pos + 6 <= end:
                version = int.from_bytes(body[pos + 4 : pos + 6], "big")
            pos += 4 + size
    return random, suite, version
