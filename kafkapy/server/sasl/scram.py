"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer serves them.

Credentials are Kafka's: salt, StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
HMAC(SaltedPassword, "Server Key") and the iteration count, stored in the metadata store's
``users/<user>`` entity as ``SCRAM-SHA-256=salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
(ScramCredentialUtils' format). The password itself is never stored.

The exchange is two round trips: client-first ``n,[a=authzid],n=user,r=cnonce[,ext=v...]``, answered
``r=cnonce+snonce,s=salt,i=iterations``; client-final ``c=biws,r=nonce,p=proof``, answered
``v=server-signature``. As in Kafka, every failure after the handshake is a SaslException (the client
gets the generic "invalid credentials" message; the reason goes to the log), except an authorization
id that is not the user, which the client is told.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

import attrs

from kafkapy.protocol.strings import decode_string
from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse

__all__ = ["MECHANISMS", "ScramCredential", "ScramMechanism", "ScramServer",
           "credential_from_salted_password", "parse_credential", "salted_password"]


@attrs.frozen
class ScramMechanism:
    name: str
    hash_name: str
    code: int  # Kafka's ScramMechanism type, the protocol's mechanism field
    min_iterations: int = 4096  # Kafka's ScramMechanism minimum for both
    max_iterations: int = 16384  # what AlterUserScramCredentials accepts (Kafka's limit)

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


MECHANISMS = {m.name: m for m in (ScramMechanism("SCRAM-SHA-256", "sha256", 1),
                                  ScramMechanism("SCRAM-SHA-512", "sha512", 2))}
MECHANISMS_BY_CODE = {m.code: m for m in MECHANISMS.values()}


@attrs.frozen
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        """ScramCredentialUtils.credentialToString's form."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")


def parse_credential(text: str) -> ScramCredential | None:
    """A stored credential, or None if ``text`` is not ScramCredentialUtils' form."""
    fields = dict(item.partition("=")[::2] for item in text.split(","))
    try:
        return ScramCredential(base64.b64decode(fields["salt"], validate=True),
                               base64.b64decode(fields["stored_key"], validate=True),
                               base64.b64decode(fields["server_key"], validate=True),
                               int(fields["iterations"]))
    except (KeyError, ValueError, binascii.Error):
        return None


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials stores for an upsertion (the client salts the password)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    server_key = mechanism.hmac(salted, b"Server Key")
    return ScramCredential(salt, mechanism.hash(client_key), server_key, iterations)


# Kafka's ScramMessages patterns: only gs2 flag "n" (no channel binding); names of ASCII characters
# ("," and "=" escaped), as Kafka reads them: a user whose name is not ASCII cannot log in with SCRAM;
# printable nonces without ",".
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_EXTENSIONS = r"(?:,[A-Za-z]+=[\x01-\x2B\x2D-\x7F]+)*"  # alphabetic names, non-empty ASCII values
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,"
                           rf"(?P<bare>n=(?P<name>{_SASLNAME}),r=(?P<nonce>[!-+\--~]+)"
                           rf"(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(r"(?P<without_proof>c=(?P<channel>[A-Za-z0-9/+]+=*),r=(?P<nonce>[!-+\--~]+)"
                           rf"{_EXTENSIONS}),p=(?P<proof>[A-Za-z0-9/+]+=*)")
_SASL_NAME_ESCAPES = re.compile(r"=(2C|3D)")

CredentialLookup = Callable[[str, str], ScramCredential | None]  # (mechanism, user) -> credential


def _username(sasl_name: str) -> str:
    """RFC 5802's saslname: "," is sent as "=2C" and "=" as "=3D"; any other "=" is malformed."""
    if "=" in _SASL_NAME_ESCAPES.sub("", sasl_name):
        raise MalformedResponse(f"Invalid username: {sasl_name}")
    return _SASL_NAME_ESCAPES.sub(lambda m: "," if m.group(1) == "2C" else "=", sasl_name)


class ScramServer:
    """One connection's SCRAM exchange; ``lookup(mechanism, user)`` gives the stored credential."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._scram = MECHANISMS[mechanism]
        self._lookup = lookup
        self._step = 0  # 0: expects client-first; 1: client-final; 2: complete
        self._user = ""
        self._nonce = ""
        self._auth_prefix = ""  # client-first-bare "," server-first
        self._credential: ScramCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        text = decode_string(token)  # ScramMessages: new String(bytes, UTF_8), never refused
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise MalformedResponse("SCRAM authentication already completed")

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise MalformedResponse("Invalid SCRAM client first message")
        user = _username(match["name"])
        extensions = dict(e.partition("=")[::2] for e in match["extensions"].split(",") if e)
        credential = None if extensions.get("tokenauth") == "true" else self._lookup(self.mechanism, user)
        if credential is None:  # delegation tokens are not served
            raise MalformedResponse(f"Authentication failed: Invalid user credentials for {user!r}")
        # Only a user that exists is told of its authorization id (Kafka's order).
        if match["authzid"] and match["authzid"] != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < self._scram.min_iterations:
            raise MalformedResponse(f"Iterations {credential.iterations} is less than the minimum "
                                    f"{self._scram.min_iterations} for {self.mechanism}")
        self._user, self._credential = user, credential
        self._nonce = match["nonce"] + secrets.token_urlsafe(24)
        server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                        f"i={credential.iterations}")
        self._auth_prefix = f"{match['bare']},{server_first}"
        self._step = 1
        return server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise MalformedResponse("Invalid SCRAM client final message")
        if match["nonce"] != self._nonce:
            raise MalformedResponse("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._auth_prefix},{match['without_proof']}".encode()
        try:
            proof = base64.b64decode(match["proof"])
        except binascii.Error:
            raise MalformedResponse("Invalid SCRAM client final message: proof is not base64") from None
        signature = self._scram.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise MalformedResponse("Invalid client credentials")
        client_key = bytes(p ^ s for p, s in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self._scram.hash(client_key), credential.stored_key):
            raise MalformedResponse("Invalid client credentials")
        self._step = 2
        server_signature = self._scram.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)

    @property
    def complete(self) -> bool:
        return self._step == 2

    @property
    def credential_expiry_ms(self) -> int | None:
        return None  # a password does not expire (delegation tokens, which do, are not served)

    @property
    def authorization_id(self) -> str:
        if not self.complete:
            raise RuntimeError("SCRAM authentication has not completed")
        return self._user
