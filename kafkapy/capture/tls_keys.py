"""TLS record keys from logged secrets, and the AEAD that opens a record with them.

Theory of operation
-------------------
A key log gives, per connection, either TLS 1.2's master secret or TLS 1.3's traffic secrets.
From them each direction's write key and IV follow by the RFCs' key schedules:

* TLS 1.3 (RFC 8446 section 7.3): ``key = HKDF-Expand-Label(secret, "key", "", key_length)`` and
  ``iv = HKDF-Expand-Label(secret, "iv", "", 12)``; a KeyUpdate replaces the secret by
  ``HKDF-Expand-Label(secret, "traffic upd", "", hash_length)`` (section 7.2). The nonce is the
  IV xor the record's sequence number, the additional data the record's 5-byte header, and the
  plaintext ends with its real content type followed by zero padding (section 5.2).
* TLS 1.2 (RFC 5246 section 6.3): the key block is ``PRF(master_secret, "key expansion",
  server_random + client_random)``, with the suite's hash in the PRF (section 5), cut into the
  client's and server's keys and then their fixed IVs (AEAD suites have no MAC keys). AES-GCM
  (RFC 5288) takes a 4-byte salt from the key block and 8 explicit nonce bytes from the front of
  each record; ChaCha20-Poly1305 (RFC 7905) a 12-byte IV xor the sequence number, as TLS 1.3
  does. The additional data is ``seq_num + type + version + plaintext length``.

The sequence number counts the records of one direction under one key, from 0; it is not on the
wire, so after records the capture lost the next one's number is found by trying
(:meth:`RecordKeys.open_from`): a wrong number fails authentication.

HMAC and the HKDF/PRF expansions are the standard library's; only the AEAD needs
``cryptography`` (the ``tls`` extra), imported by :func:`require_aead`.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "SUITES",
    "CipherSuite",
    "RecordKeys",
    "require_aead",
    "tls12_keys",
    "tls13_keys",
    "tls13_next_secret",
]

TLS12 = 0x0303
TLS13 = 0x0304

_AES_GCM, _CHACHA = "aes-gcm", "chacha20-poly1305"


class CipherSuite(NamedTuple):
    """An AEAD suite: its name (IANA's), cipher, key length and the hash of its PRF or HKDF."""

    name: str
    cipher: str
    key_length: int
    hash_name: str

    @property
    def hash_length(self) -> int:
        return hashlib.new(self.hash_name).digest_size


#: The suites read, by code point (IANA's TLS Cipher Suites registry): the three of TLS 1.3 and
#: TLS 1.2's AEAD suites with ECDHE, DHE or RSA key exchange, which OpenSSL offers by default.
#: A CBC suite is not read (no Kafka client's default list since OpenSSL 1.1 puts one first).
SUITES: dict[int, CipherSuite] = {
    0x1301: CipherSuite("TLS_AES_128_GCM_SHA256", _AES_GCM, 16, "sha256"),
    0x1302: CipherSuite("TLS_AES_256_GCM_SHA384", _AES_GCM, 32, "sha384"),
    0x1303: CipherSuite("TLS_CHACHA20_POLY1305_SHA256", _CHACHA, 32, "sha256"),
    0xC02B: CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", _AES_GCM, 16, "sha256"),
    0xC02C: CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", _AES_GCM, 32, "sha384"),
    0xC02F: CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", _AES_GCM, 16, "sha256"),
    0xC030: CipherSuite("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", _AES_GCM, 32, "sha384"),
    0xCCA8: CipherSuite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", _CHACHA, 32, "sha256"),
    0xCCA9: CipherSuite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", _CHACHA, 32, "sha256"),
    0xCCAA: CipherSuite("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", _CHACHA, 32, "sha256"),
    0x009E: CipherSuite("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", _AES_GCM, 16, "sha256"),
    0x009F: CipherSuite("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", _AES_GCM, 32, "sha384"),
    0x009C: CipherSuite("TLS_RSA_WITH_AES_128_GCM_SHA256", _AES_GCM, 16, "sha256"),
    0x009D: CipherSuite("TLS_RSA_WITH_AES_256_GCM_SHA384", _AES_GCM, 32, "sha384"),
}

_TAG = 16  # both AEADs' tag length (RFC 5116, RFC 8439)
_EXPLICIT_NONCE = 8  # TLS 1.2 AES-GCM's nonce_explicit (RFC 5288 section 3)
_SEQ = struct.Struct(">Q")
_AAD12 = struct.Struct(">QBHH")


class AeadMissing(ImportError):
    """``cryptography`` is not installed: it decrypts TLS records."""


def require_aead() -> Any:
    """The ``cryptography`` AEAD module; AeadMissing, saying what to install, if it is absent."""
    try:
        from cryptography.hazmat.primitives.ciphers import aead
    except ImportError:
        raise AeadMissing("decrypting TLS needs the cryptography package: "
                          "pip install 'kafkapy[tls]'") from None
    return aead


def _hkdf_expand(hash_name: str, secret: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 section 2.3."""
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(secret, block + info + bytes([counter]), hash_name).digest()
        out += block
        counter += 1
    return out[:length]


def _expand_label(hash_name: str, secret: bytes, label: bytes, length: int) -> bytes:
    """HKDF-Expand-Label with an empty context (RFC 8446 section 7.1)."""
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + b"\x00"
    return _hkdf_expand(hash_name, secret, info, length)


def _prf(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.2's PRF: P_hash(secret, label + seed) (RFC 5246 section 5)."""
    seed = label + seed
    out, a = b"", seed
    while len(out) < length:
        a = hmac.new(secret, a, hash_name).digest()
        out += hmac.new(secret, a + seed, hash_name).digest()
    return out[:length]


class RecordKeys:
    """One direction's record protection under one key: opens its records in order."""

    __slots__ = ("_aead", "_iv", "_open", "seq")

    def __init__(self, suite: CipherSuite, key: bytes, iv: bytes, version: int) -> None:
        aead = require_aead()
        self._aead = aead.AESGCM(key) if suite.cipher == _AES_GCM else aead.ChaCha20Poly1305(key)
        self._iv = iv
        self.seq = 0
        opener: Callable[[int, int, bytes], tuple[int, bytes] | None]
        if version == TLS13:
            opener = self._open13
        elif suite.cipher == _AES_GCM:
            opener = self._open12_gcm
        else:
            opener = self._open12_chacha
        self._open = opener

    def open(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes] | None:
        """(content type, plaintext) of the next record, or None if it does not authenticate (a
        wrong key, a record lost before it, or damage). The sequence number advances on success."""
        opened = self._open(content_type, version, fragment)
        if opened is not None:
            self.seq += 1
        return opened

    def open_from(
        self, first: int, last: int, content_type: int, version: int, fragment: bytes
    ) -> tuple[int, tuple[int, bytes]] | None:
        """The record opened at the first sequence number from ``first`` to ``last`` that
        authenticates it, and that number (the next is then expected after it), or None: for a
        record after some the capture lost, whose number is not known. TLS 1.2's AES-GCM tries
        the explicit nonce first, which OpenSSL and most stacks fill with the sequence number."""
        numbers: list[int] = []
        if self._open == self._open12_gcm and len(fragment) >= _EXPLICIT_NONCE:
            explicit = int.from_bytes(fragment[:_EXPLICIT_NONCE], "big")
            if first <= explicit <= last:
                numbers.append(explicit)
        saved = self.seq
        for seq in (*numbers, *range(first, last + 1)):
            self.seq = seq
            opened = self._open(content_type, version, fragment)
            if opened is not None:
                self.seq = seq + 1
                return seq, opened
        self.seq = saved
        return None

    @property
    def overhead(self) -> int:
        """Bytes a record adds to its plaintext: header, tag, and TLS 1.3's content type byte or
        TLS 1.2 AES-GCM's explicit nonce (no padding: none of the stacks read here pads)."""
        if self._open == self._open13:
            return 5 + _TAG + 1
        return 5 + _TAG + (_EXPLICIT_NONCE if self._open == self._open12_gcm else 0)

    def _nonce(self) -> bytes:
        iv = self._iv
        return bytes(a ^ b for a, b in zip(iv, bytes(len(iv) - 8) + _SEQ.pack(self.seq)))

    def _decrypt(self, nonce: bytes, data: bytes, aad: bytes) -> bytes | None:
        try:
            plain: bytes = self._aead.decrypt(nonce, data, aad)
        except Exception:  # cryptography's InvalidTag; a malformed input is the same verdict
            return None
        return plain

    def _open13(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes] | None:
        if len(fragment) < _TAG + 1:
            return None
        header = struct.pack(">BHH", content_type, version, len(fragment))
        inner = self._decrypt(self._nonce(), fragment, header)
        if inner is None:
            return None
        inner = inner.rstrip(b"\x00")
        if not inner:
            return None  # all padding: no content type (RFC 8446 section 5.4: unexpected_message)
        return inner[-1], inner[:-1]

    def _open12_gcm(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes] | None:
        if len(fragment) < _EXPLICIT_NONCE + _TAG:
            return None
        nonce = self._iv + fragment[:_EXPLICIT_NONCE]
        aad = _AAD12.pack(self.seq, content_type, version, len(fragment) - _EXPLICIT_NONCE - _TAG)
        plain = self._decrypt(nonce, fragment[_EXPLICIT_NONCE:], aad)
        return None if plain is None else (content_type, plain)

    def _open12_chacha(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes] | None:
        if len(fragment) < _TAG:
            return None
        aad = _AAD12.pack(self.seq, content_type, version, len(fragment) - _TAG)
        plain = self._decrypt(self._nonce(), fragment, aad)
        return None if plain is None else (content_type, plain)


def tls13_keys(suite: CipherSuite, secret: bytes) -> RecordKeys:
    """The record keys of a TLS 1.3 traffic secret (RFC 8446 section 7.3)."""
    key = _expand_label(suite.hash_name, secret, b"key", suite.key_length)
    iv = _expand_label(suite.hash_name, secret, b"iv", 12)
    return RecordKeys(suite, key, iv, TLS13)


def tls13_next_secret(suite: CipherSuite, secret: bytes) -> bytes:
    """The traffic secret after a KeyUpdate (RFC 8446 section 7.2)."""
    return _expand_label(suite.hash_name, secret, b"traffic upd", suite.hash_length)


def tls12_keys(
    suite: CipherSuite, master_secret: bytes, client_random: bytes, server_random: bytes
) -> tuple[RecordKeys, RecordKeys]:
    """The client's and the server's record keys of a TLS 1.2 AEAD suite (RFC 5246 section 6.3;
    fixed IV lengths from RFC 5288 section 3 and RFC 7905 section 2)."""
    iv_length = 4 if suite.cipher == _AES_GCM else 12
    size = 2 * (suite.key_length + iv_length)
    block = _prf(suite.hash_name, master_secret, b"key expansion", server_random + client_random, size)
    k = suite.key_length
    client_key, server_key = block[:k], block[k : 2 * k]
    client_iv, server_iv = block[2 * k : 2 * k + iv_length], block[2 * k + iv_length :]
    return (RecordKeys(suite, client_key, client_iv, TLS12), RecordKeys(suite, server_key, server_iv, TLS12))
