"""JSON Web Key Sets (RFC 7517) for Kafka's signed-token validator (KIP-768): the keys, which of
them may verify a token's signature, and where the set comes from.

Kafka's OAuthBearerValidatorCallbackHandler reads ``sasl.oauthbearer.jwks.endpoint.url``: a
``file:`` URL is read once, when the broker starts (JwksFileVerificationKeyResolver: no refresh); an
``http(s):`` URL is fetched once at start (a failure fails the start) and then again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` in a thread of its own, each refresh retried with
exponential backoff from ``...retry.backoff.ms`` for at most ``...retry.backoff.max.ms`` (a refresh
that still fails keeps the keys held). A token whose key is not in the set is refused at once and
asks for an early refresh, at most once a minute per key id (RefreshingHttpsJwks), so the client's
next attempt finds a key the provider has rotated in. Nothing here runs on the broker's event loop:
validation only reads the keys held.

Keys are RSA, EC (P-256/384/521), OKP (Ed25519/Ed448) and oct (HMAC secrets), as jose4j reads
them; a key this cannot read is skipped (logged), as jose4j skips it. Signatures use the
``cryptography`` package (the ``kafkapy[oauth]`` extra).
"""

from __future__ import annotations

import hmac
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from kafkapy.server.sasl import base64url

__all__ = ["ALGORITHMS", "FileJwks", "HttpJwks", "JsonWebKey", "JwksError", "KeySource", "parse_jwks",
           "public_jwk", "sign"]

log = logging.getLogger(__name__)

MIN_RSA_BITS = 2048  # jose4j refuses smaller RSA keys
MISSING_KEY_ID_IN_FLIGHT_MS = 60_000  # RefreshingHttpsJwks: one early refresh a minute per unknown kid
MISSING_KEY_ID_CACHE_SIZE = 16
MISSING_KEY_ID_MAX_LENGTH = 1000  # a longer kid asks for no refresh (and is not remembered)
FETCH_TIMEOUT_S = 10.0

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
Key = PublicKey | bytes  # bytes: an oct key (HMAC secret)

_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES: dict[str, tuple[type[ec.EllipticCurve], int]] = {  # crv -> (curve, bytes of r and of s)
    "P-256": (ec.SECP256R1, 32), "P-384": (ec.SECP384R1, 48), "P-521": (ec.SECP521R1, 66)}
_EC_ALGORITHM_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
# alg -> the kty of the keys that may verify it (jose4j's JWS algorithms, 'none' excepted).
ALGORITHMS: dict[str, str] = {
    **{f"RS{n}": "RSA" for n in _HASHES}, **{f"PS{n}": "RSA" for n in _HASHES},
    **{f"HS{n}": "oct" for n in _HASHES}, **dict.fromkeys(_EC_ALGORITHM_CURVE, "EC"), "EdDSA": "OKP"}


class JwksError(Exception):
    """A key set that cannot be fetched or read."""


def _integer(jwk: Mapping[str, Any], name: str) -> int:
    return int.from_bytes(base64url.decode(jwk[name]), "big")


@attrs.frozen
class JsonWebKey:
    """One key of a set, with the parameters that decide which tokens it may verify."""

    kty: str
    key: Key = attrs.field(repr=False)
    kid: str | None = None
    use: str | None = None
    alg: str | None = None
    key_ops: tuple[str, ...] | None = None
    crv: str | None = None

    @classmethod
    def parse(cls, jwk: Mapping[str, Any]) -> JsonWebKey:
        """The key ``jwk`` describes; ValueError (or KeyError/TypeError) if it is not one."""
        kty, crv = jwk["kty"], str(jwk.get("crv"))
        key: Key
        if kty == "RSA":
            key = rsa.RSAPublicNumbers(_integer(jwk, "e"), _integer(jwk, "n")).public_key()
        elif kty == "EC":
            curve, size = _CURVES[crv]
            x, y = base64url.decode(jwk["x"]), base64url.decode(jwk["y"])
            if len(x) != size or len(y) != size:
                raise ValueError(f"{crv} coordinates are {size} bytes")
            key = ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"),
                                                curve()).public_key()
        elif kty == "OKP":
            x = base64url.decode(jwk["x"])
            if crv == "Ed25519":
                key = ed25519.Ed25519PublicKey.from_public_bytes(x)
            elif crv == "Ed448":
                key = ed448.Ed448PublicKey.from_public_bytes(x)
            else:
                raise ValueError(f"unknown OKP curve {crv!r}")
        elif kty == "oct":
            key = base64url.decode(jwk["k"])
        else:
            raise ValueError(f"unknown kty {kty!r}")
        ops = jwk.get("key_ops")
        return cls(kty, key, _optional_text(jwk, "kid"), _optional_text(jwk, "use"),
                   _optional_text(jwk, "alg"), None if ops is None else tuple(str(op) for op in ops),
                   _optional_text(jwk, "crv"))

    def may_verify(self, alg: str) -> bool:
        """Whether this key suits a token signed with ``alg`` (jose4j's VerificationJwkSelector:
        the key type, ``use`` sig, ``key_ops`` verify, the key's ``alg`` and EC curve if given)."""
        return (ALGORITHMS.get(alg) == self.kty and self.use in (None, "sig")
                and (self.key_ops is None or "verify" in self.key_ops) and self.alg in (None, alg)
                and (self.kty != "EC" or _EC_ALGORITHM_CURVE[alg] == self.crv)
                and (self.kty != "OKP" or self.crv in ("Ed25519", "Ed448")))

    def verify(self, alg: str, signing_input: bytes, signature: bytes) -> str | None:
        """None if ``signature`` is this key's for ``alg``; else why not."""
        key = self.key
        try:
            if isinstance(key, bytes):
                digest = _HASHES[alg[2:]]()
                if len(key) * 8 < digest.digest_size * 8:
                    return f"an {alg} key must be at least {digest.digest_size * 8} bits"
                mac = hmac.new(key, signing_input, digest.name).digest()
                return None if hmac.compare_digest(mac, signature) else "the signature is invalid"
            if isinstance(key, rsa.RSAPublicKey):
                if key.key_size < MIN_RSA_BITS:
                    return f"an RSA key of {key.key_size} bits is too small (at least {MIN_RSA_BITS})"
                digest = _HASHES[alg[2:]]()
                pad: padding.AsymmetricPadding = (
                    padding.PKCS1v15() if alg.startswith("RS")
                    else padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size))
                key.verify(signature, signing_input, pad, digest)
            elif isinstance(key, ec.EllipticCurvePublicKey):
                size = _CURVES[_EC_ALGORITHM_CURVE[alg]][1]
                if len(signature) != 2 * size:
                    return "the signature is invalid"
                der = encode_dss_signature(int.from_bytes(signature[:size], "big"),
                                           int.from_bytes(signature[size:], "big"))
                key.verify(der, signing_input, ec.ECDSA(_HASHES[alg[2:]]()))
            else:
                key.verify(signature, signing_input)
        except InvalidSignature:
            return "the signature is invalid"
        return None


def _optional_text(jwk: Mapping[str, Any], name: str) -> str | None:
    value = jwk.get(name)
    return value if isinstance(value, str) else None


def parse_jwks(text: str | bytes, where: str) -> tuple[JsonWebKey, ...]:
    """The keys of a JWKS document; JwksError if it is not one. A key that cannot be read is
    skipped (logged), so one odd key does not hide the others."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise JwksError(f"the JWKS from {where} is not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError(f"the JWKS from {where} has no \"keys\" array")
    keys = []
    for jwk in document["keys"]:
        try:
            keys.append(JsonWebKey.parse(jwk))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.info("JWKS from %s: a key that cannot be read is skipped (%s: %s)", where,
                     type(exc).__name__, exc)
    return tuple(keys)


class KeySource:
    """Where a validator's keys come from: ``keys`` is the set held now. ``start`` loads it (at
    broker start, off the event loop), ``close`` stops any refreshing, ``missing(kid)`` says a token
    named a key not held."""

    location = ""

    @property
    def keys(self) -> Sequence[JsonWebKey]:
        raise NotImplementedError

    def start(self) -> None:
        """Load the keys; JwksError if they cannot be had."""

    def close(self) -> None:
        """Stop refreshing."""

    def missing(self, kid: str | None) -> None:
        """A token's key is not held (the file source has nothing more to read)."""


class FileJwks(KeySource):
    """A ``file:`` JWKS, read once at start, as Kafka reads it."""

    def __init__(self, path: Path, location: str) -> None:
        self.path = path
        self.location = location
        self._keys: tuple[JsonWebKey, ...] = ()

    @property
    def keys(self) -> Sequence[JsonWebKey]:
        return self._keys

    def start(self) -> None:
        try:
            text = self.path.read_bytes()
        except OSError as exc:
            raise JwksError(f"cannot read the JWKS file {self.path}: {exc.strerror or exc}") from None
        self._keys = parse_jwks(text, self.location)


class HttpJwks(KeySource):
    """An ``http(s):`` JWKS, fetched at start and refreshed by a thread of its own (Kafka's
    RefreshingHttpsJwks); ``clock`` is real time in ms (refreshes follow the wall, not the broker's
    virtual clock)."""

    def __init__(self, location: str, refresh_ms: int, retry_backoff_ms: int, retry_backoff_max_ms: int,
                 ssl_context: ssl.SSLContext | None = None,
                 clock: Callable[[], float] = lambda: time.monotonic() * 1000) -> None:
        self.location = location
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._ssl_context = ssl_context
        self._clock = clock
        self._keys: tuple[JsonWebKey, ...] = ()
        self._lock = threading.Lock()
        self._wake = threading.Event()  # set: refresh now (an unknown kid), or stop
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._missing: OrderedDict[str, float] = OrderedDict()  # kid -> when it may ask again
        self.refreshes = 0  # refreshes that replaced the keys (start's fetch not counted)

    @property
    def keys(self) -> Sequence[JsonWebKey]:
        return self._keys

    def fetch(self) -> tuple[JsonWebKey, ...]:
        """One GET of the set; JwksError if it fails."""
        request = urllib.request.Request(self.location, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S,
                                        context=self._ssl_context) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise JwksError(f"GET {self.location} answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise JwksError(f"GET {self.location} failed: {getattr(exc, 'reason', None) or exc}") from None
        return parse_jwks(body, self.location)

    def start(self) -> None:
        self._keys = self.fetch()
        self._thread = threading.Thread(target=self._run, name=f"jwks-refresh {self.location}", daemon=True)
        self._thread.start()
        log.info("JWKS from %s: %d keys; refreshing every %d ms", self.location, len(self._keys),
                 self.refresh_ms)

    def close(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(FETCH_TIMEOUT_S)
            self._thread = None

    def missing(self, kid: str | None) -> None:
        """Ask for an early refresh, unless this kid asked less than a minute ago."""
        kid = kid or ""
        if len(kid) > MISSING_KEY_ID_MAX_LENGTH:
            log.warning("JWKS from %s: a key id of %d characters is too long to look up", self.location,
                        len(kid))
            return
        now = self._clock()
        with self._lock:
            next_check = self._missing.get(kid)
            if next_check is not None:
                self._missing.move_to_end(kid)  # Kafka's cache is access-ordered: a kid asked for stays
                if next_check > now:
                    return
            self._missing[kid] = now + MISSING_KEY_ID_IN_FLIGHT_MS
            while len(self._missing) > MISSING_KEY_ID_CACHE_SIZE:
                self._missing.popitem(last=False)
        log.debug("JWKS from %s: no key for kid %r, refreshing early", self.location, kid)
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.refresh_ms / 1000)
            self._wake.clear()
            if self._stopping:
                return
            self.refresh()

    def refresh(self) -> None:
        """Fetch the set again, with Kafka's retry: backoff doubling from retry.backoff.ms, for at
        most retry.backoff.max.ms. A refresh that fails keeps the keys held (and says so)."""
        end = self._clock() + self.retry_backoff_max_ms
        attempt = 0
        while True:
            attempt += 1
            try:
                keys = self.fetch()
            except JwksError as exc:
                wait_ms = min(self.retry_backoff_ms * 2 ** (attempt - 1), end - self._clock())
                if wait_ms <= 0 or self._stopping:
                    log.warning("JWKS refresh from %s failed (%s); keeping the %d keys held", self.location,
                                exc, len(self._keys))
                    return
                log.info("JWKS refresh from %s, attempt %d: %s; retrying in %d ms", self.location, attempt,
                         exc, wait_ms)
                time.sleep(wait_ms / 1000)
                continue
            with self._lock:
                for key in keys:
                    if key.kid is not None:
                        self._missing.pop(key.kid, None)
                self._keys = keys
                self.refreshes += 1
            log.info("JWKS refresh from %s: %d keys", self.location, len(keys))
            return


PrivateKey = (rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
              | ed448.Ed448PrivateKey)


def _int_bytes(value: int, size: int = 0) -> bytes:
    return value.to_bytes(max(size, (value.bit_length() + 7) // 8, 1), "big")


def public_jwk(key: PrivateKey | bytes, kid: str | None = None, **extra: str) -> dict[str, Any]:
    """The JWK (a dict) that verifies what ``key`` signs: for a provider's JWKS in tests and
    examples (bytes: an HMAC secret, published as an oct key)."""
    jwk: dict[str, Any]
    if isinstance(key, bytes):
        jwk = {"kty": "oct", "k": base64url.encode(key)}
    elif isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        jwk = {"kty": "RSA", "n": base64url.encode(_int_bytes(numbers.n)),
               "e": base64url.encode(_int_bytes(numbers.e))}
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        crv = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}[key.curve.name]
        point = key.public_key().public_numbers()
        size = _CURVES[crv][1]
        jwk = {"kty": "EC", "crv": crv, "x": base64url.encode(_int_bytes(point.x, size)),
               "y": base64url.encode(_int_bytes(point.y, size))}
    else:
        from cryptography.hazmat.primitives import serialization

        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        jwk = {"kty": "OKP", "crv": "Ed25519" if isinstance(key, ed25519.Ed25519PrivateKey) else "Ed448",
               "x": base64url.encode(raw)}
    return {**jwk, **({"kid": kid} if kid is not None else {}), **extra}


def sign(key: PrivateKey | bytes, alg: str, signing_input: bytes) -> bytes:
    """The JWS signature of ``signing_input`` with ``key`` for ``alg`` (the counterpart of
    JsonWebKey.verify: ES* signatures are r||s, as RFC 7518 has them)."""
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    if isinstance(key, bytes):
        return hmac.new(key, signing_input, _HASHES[alg[2:]]().name).digest()
    if isinstance(key, rsa.RSAPrivateKey):
        digest = _HASHES[alg[2:]]()
        pad: padding.AsymmetricPadding = (
            padding.PKCS1v15() if alg.startswith("RS")
            else padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size))
        return key.sign(signing_input, pad, digest)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        size = _CURVES[_EC_ALGORITHM_CURVE[alg]][1]
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(_HASHES[alg[2:]]())))
        return _int_bytes(r, size) + _int_bytes(s, size)
    return key.sign(signing_input)
