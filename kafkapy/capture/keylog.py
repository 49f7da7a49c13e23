"""The NSS key log (SSLKEYLOGFILE): the secrets a TLS client wrote down, by client random.

Each line is ``LABEL <client random, 64 hex digits> <secret, hex>``; ``#`` starts a comment.
The labels read here are the ones that decrypt a connection after the fact:

    CLIENT_RANDOM                    TLS 1.2: the 48-byte master secret
    CLIENT_HANDSHAKE_TRAFFIC_SECRET  TLS 1.3: the handshake's secrets, one per direction
    SERVER_HANDSHAKE_TRAFFIC_SECRET
    CLIENT_TRAFFIC_SECRET_0          TLS 1.3: the first application traffic secrets
    SERVER_TRAFFIC_SECRET_0

Other labels (EXPORTER_SECRET, CLIENT_EARLY_TRAFFIC_SECRET, RSA) are skipped, and so is a line
that does not parse: a key log is appended to by every process that shares it, and one torn
line must not cost the rest. A client may still be writing the file while a capture is decoded
(a live pipe), so a lookup that misses reads the file again if it has grown.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["KEY_LOG_LABELS", "KeyLog", "KeyLogError"]

KEY_LOG_LABELS = frozenset({
    "CLIENT_RANDOM",
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    "CLIENT_TRAFFIC_SECRET_0",
    "SERVER_TRAFFIC_SECRET_0",
})  # fmt: skip

_RANDOM_LEN = 32  # RFC 8446 section 4.1.2 (and RFC 5246 section 7.4.1.2): 32 random bytes


class KeyLogError(ValueError):
    """A key log that cannot be read at all (missing, unreadable, or without one usable line)."""


class KeyLog:
    """Secrets by client random, read from an NSS key log file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._secrets: dict[bytes, dict[str, bytes]] = {}
        self._read_to = 0  # bytes of the file parsed so far (it is only ever appended to)
        self.skipped_lines = 0
        try:
            self._read()
        except OSError as exc:
            raise KeyLogError(f"cannot read the TLS key log {self.path}: {exc.strerror or exc}") from None
        if not self._secrets:
            raise KeyLogError(f"the TLS key log {self.path} has no secrets (lines such as "
                              "'CLIENT_RANDOM <random> <secret>' or 'CLIENT_TRAFFIC_SECRET_0 ...')")

    def __len__(self) -> int:
        return len(self._secrets)

    def secrets(self, client_random: bytes, labels: Iterable[str] = ()) -> dict[str, bytes] | None:
        """The secrets logged for this client random, by label; None if there are none. When some
        of ``labels`` are missing, the file is read again first if it has grown (a client that
        shares it may still be writing)."""
        found = self._secrets.get(client_random)
        if (found is None or any(label not in found for label in labels)) and self._grew():
            found = self._secrets.get(client_random)
        return found

    def _grew(self) -> bool:
        try:
            if os.path.getsize(self.path) <= self._read_to:
                return False
            self._read()
        except OSError:
            return False
        return True

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            f.seek(self._read_to)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a last line still being written is read next time
        if end == 0 and data and not self._secrets:
            end = len(data)  # a one-line file without its newline
        self._read_to += end
        for raw in data[:end].splitlines():
            self._parse(raw.decode("ascii", "replace"))

    def _parse(self, line: str) -> None:
        words = line.split()
        if not words or words[0].startswith("#"):
            return
        if len(words) != 3 or words[0] not in KEY_LOG_LABELS:
            self.skipped_lines += 1
            return
        label, random_hex, secret_hex = words
        try:
            client_random, secret = bytes.fromhex(random_hex), bytes.fromhex(secret_hex)
        except ValueError:
            self.skipped_lines += 1
            return
        if len(client_random) != _RANDOM_LEN or not secret:
            self.skipped_lines += 1
            return
        self._secrets.setdefault(client_random, {})[label] = secret
