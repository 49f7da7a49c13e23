"""Base64URL without padding (RFC 7515 section 2), the encoding of a JWT's three sections.

One module for the broker's validators, the signing helpers and the CLI tools' logins: it needs
nothing outside the standard library, so the tools import it without the ``oauth`` extra.
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["decode", "encode"]

_FROM_URL_ALPHABET = str.maketrans("-_", "+/")


def encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode(text: str) -> bytes:
    """The bytes of ``text``; padding is tolerated. ValueError if it is not Base64URL."""
    if not isinstance(text, str) or not text.isascii():
        raise ValueError("not Base64URL")
    try:
        return base64.b64decode(text.translate(_FROM_URL_ALPHABET) + "=" * (-len(text) % 4), validate=True)
    except binascii.Error:
        raise ValueError("not Base64URL") from None
