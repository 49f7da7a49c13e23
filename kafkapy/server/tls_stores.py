"""A TLS listener's key and trust stores, from Kafka's ``ssl.keystore.*`` and ``ssl.truststore.*``.

Kafka reads Java key stores (JKS, PKCS12) and, since KIP-651, PEM: ``ssl.keystore.type=PEM`` with
``ssl.keystore.location`` a PEM file holding the private key and the certificate chain, or the two
inline as ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``; ``ssl.key.password``
decrypts an encrypted key. ``ssl.truststore.type=PEM`` takes ``ssl.truststore.location`` or the
certificates inline as ``ssl.truststore.certificates``. kafkapy serves the PEM forms, and PKCS12
stores (keytool's format since Java 9, which Java reads as ``JKS`` too) through the cryptography
package, turned into PEM for Python's ssl; a store in Java's own JKS format is refused naming the
conversion.

The checks are Kafka's (DefaultSslEngineFactory.createKeystore and createTruststore), in its order and
words, and so is what a PEM key may be: PKCS#8 (``BEGIN PRIVATE KEY``), or encrypted PKCS#8
(``BEGIN ENCRYPTED PRIVATE KEY``) exactly when ``ssl.key.password`` is set; exactly one key, at
least one certificate. (A value written over several lines of an environment variable reaches
Kafka's file as its first line only, the apache/kafka image's way: no block is found in it.) Each
key may be set for one listener, ``listener.name.<listener>.<key>``, which wins over the plain key,
as in Kafka. kafkapy's own ``ssl.certfile``/``ssl.keyfile``/
``ssl.cafile`` remain; a listener given both kinds is refused. The CLI tools' ``--command-config``
reads a client's stores with the same code (``read_key_store``, ``read_trust_store``), as Kafka's
clients and brokers share DefaultSslEngineFactory.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from kafkapy.server.config import LISTENER_PREFIX, BrokerConfig, ConfigError

__all__ = ["PEM", "Lookup", "load_key_store", "load_trust_store", "read_key_store", "read_trust_store"]

# A store setting's value by its plain name (ssl.keystore.location...), None when unset: a
# broker listener's (its listener.name.<l>. key first), or a client's properties.
Lookup = Callable[[str], str | None]

PEM = "PEM"
# A PEM block as Kafka's PemParser finds one: BEGIN and END lines naming the type, base64 between.
_BLOCK = re.compile(r"-+BEGIN\s*([^-]*?)\s*-+\s+(.*?)-+END\s*[^-]*-+", re.S)
_NO_CERTIFICATE = "No matching CERTIFICATE entries in PEM file"  # Kafka's PemParser, finding none
_JKS_MAGIC = b"\xfe\xed\xfe\xed"  # the first bytes of Java's JKS format (a PKCS12 file is DER: 0x30)
_JAVA_STORE_TYPES = ("JKS", "PKCS12")


def setting(config: BrokerConfig, listener: str, key: str) -> str | None:
    """``listener.name.<listener>.<key>`` if set, else ``<key>``: Kafka's per-listener SSL settings."""
    value = config.get(f"{LISTENER_PREFIX}{listener.lower()}.{key}")
    if value is None:
        value = config.get(key)
    return None if value is None else str(value)


def load_key_store(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    """Load the listener's key store into ``context``; False if none is configured."""
    return read_key_store(context, _listener_lookup(config, listener), _listener_head(listener))


def load_trust_store(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    """Load the listener's trust store (the CAs its client certificates are checked against) into
    ``context``; False if none is configured."""
    return read_trust_store(context, _listener_lookup(config, listener), _listener_head(listener))


def _listener_lookup(config: BrokerConfig, listener: str) -> Lookup:
    return lambda key: setting(config, listener, key)


def _listener_head(listener: str) -> str:
    return f"invalid SSL settings for listener {listener}"


def read_key_store(context: ssl.SSLContext, get: Lookup, head: str) -> bool:
    """Load the key store ``get`` names into ``context``; False if none is configured. ``head``
    opens each refusal."""
    store_type, path, password = _store(get, "keystore")
    key_password = get("ssl.key.password")
    key = get("ssl.keystore.key")
    chain = get("ssl.keystore.certificate.chain")
    if key is not None:
        if store_type != PEM:
            raise _refused(head, "SSL private key can be specified only for PEM, but key store type is "
                                 f"{store_type}.")
        if chain is None:
            raise _refused(head, "SSL private key is specified, but certificate chain is not specified.")
        if path is not None:
            raise _refused(head, "Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise _refused(head, "SSL key store password cannot be specified with PEM format, only key "
                                 "password may be specified.")
        _load_pem_key_store(context, chain, key, key_password, head, "Invalid PEM keystore configs")
        return True
    if chain is not None:
        raise _refused(head, "SSL certificate chain is specified, but private key is not specified")
    if store_type == PEM and path is not None:
        if password is not None:
            raise _refused(head, "SSL key store password cannot be specified with PEM format, only key "
                                 "password may be specified")
        text = _read(path, head, "keystore")
        _load_pem_key_store(context, text, text, key_password, head,
                            f"Failed to load PEM SSL keystore {path}")
        return True
    if path is None and password is not None:
        raise _refused(head, "SSL key store is not specified, but key store password is specified.")
    if path is not None and password is None:
        raise _refused(head, "SSL key store is specified, but key store password is not specified.")
    if path is not None and password is not None:
        key_entry, certificates = _pkcs12(path, password, store_type, "keystore", head)
        if key_entry is None or not certificates:
            raise _refused(head, f"Failed to load SSL keystore {path} of type {store_type}: it holds no "
                                 "private key with its certificate")
        _load_chain(context, "".join(certificates) + key_entry, None, head,
                    f"Failed to load SSL keystore {path} of type {store_type}")
        return True
    return False


def read_trust_store(context: ssl.SSLContext, get: Lookup, head: str) -> bool:
    """Load the trust store ``get`` names (the CAs the peer's certificates are checked against)
    into ``context``; False if none is configured."""
    store_type, path, password = _store(get, "truststore")
    certificates = get("ssl.truststore.certificates")
    if certificates is not None:
        if store_type != PEM:
            raise _refused(head, "SSL trust store certs can be specified only for PEM, but trust store "
                                 f"type is {store_type}.")
        if path is not None:
            raise _refused(head, "Both SSL trust store location and separate trust certificates are "
                                 "specified.")
        if password is not None:
            raise _refused(head, "SSL trust store password cannot be specified for PEM format.")
        _load_pem_trust_store(context, certificates, head, None)
        return True
    if store_type == PEM and path is not None:
        if password is not None:
            raise _refused(head, "SSL trust store password cannot be specified for PEM format.")
        _load_pem_trust_store(context, _read(path, head, "truststore"), head,
                              f"Failed to load PEM SSL keystore {path}")  # Kafka's words, for both stores
        return True
    if path is None and password is not None:
        raise _refused(head, "SSL trust store is not specified, but trust store password is specified.")
    if path is not None:
        _, trusted = _pkcs12(path, password, store_type, "truststore", head)
        _load_pem_trust_store(context, "".join(trusted), head,
                              f"Failed to load SSL keystore {path} of type {store_type}")  # Kafka's words
        return True
    return False


def _store(get: Lookup, kind: str) -> tuple[str, str | None, str | None]:
    """A store's type (Kafka's default JKS), location and password: ``ssl.<kind>.*``."""
    store_type = (get(f"ssl.{kind}.type") or "JKS").upper()
    return store_type, get(f"ssl.{kind}.location"), get(f"ssl.{kind}.password")


def _pkcs12(path: str, password: str | None, store_type: str, kind: str, head: str,
            ) -> tuple[str | None, list[str]]:
    """A Java store's private key (PKCS#8 PEM, or None) and certificates (PEM), read as Java reads
    a ``JKS`` or ``PKCS12`` store: a PKCS12 file (keytool's format since Java 9, whatever its name or
    declared type; the apache/kafka image's example ``*.keystore.jks`` are PKCS12) is read with the
    cryptography package; a JKS one (Java's own format) cannot be, and is refused naming the fix."""
    failure = f"Failed to load SSL keystore {path} of type {store_type}"  # Kafka's words, both stores
    if store_type not in _JAVA_STORE_TYPES:
        raise _refused(head, f"{failure}: ssl.{kind}.type {store_type} is not one kafkapy reads "
                             "(PEM, PKCS12, or JKS holding PKCS12)")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise _refused(head, f"{failure}: {exc.strerror or exc}") from None
    if data[:4] == _JKS_MAGIC:
        raise _refused(head, f"{failure}: it is in Java's JKS format, which kafkapy cannot read: "
                             f"convert it to PKCS12 (keytool -importkeystore -srckeystore {path} "
                             f"-deststoretype PKCS12) or to PEM (ssl.{kind}.type=PEM)")
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise _refused(head, f"{failure}: reading a PKCS12 store needs the cryptography package "
                             "(pip install 'kafkapy[tls]'), or convert it to PEM") from None
    try:
        key, certificate, others = pkcs12.load_key_and_certificates(
            data, password.encode() if password is not None else None)
    except (ValueError, TypeError) as exc:  # a wrong password, or not a PKCS12 file
        raise _refused(head, f"{failure}: {exc}") from None
    pems = [c.public_bytes(serialization.Encoding.PEM).decode()
            for c in ([certificate] if certificate is not None else []) + list(others)]
    key_pem = None if key is None else key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return key_pem, pems


def _refused(head: str, reason: str) -> ConfigError:
    return ConfigError(f"{head}: {reason}")


def _read(path: str, head: str, store: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise _refused(head, f"Failed to load PEM SSL {store} {path}: {reason}") from None


def _blocks(pem: str) -> list[tuple[str, str]]:
    return [(label.strip(), body) for label, body in _BLOCK.findall(pem)]


def _base64_problem(bodies: list[str]) -> str | None:
    """Why one of the blocks' bodies is not base64, as Kafka's PemParser (Java's Base64 decoder)
    refuses it; None when all are. Checked before OpenSSL sees them: a character outside base64
    that is not ASCII is one Python's ssl cannot even pass on."""
    for body in bodies:
        data = re.sub(r"\s+", "", body).rstrip("=")
        bad = next((ch for ch in data if not (ch.isascii() and (ch.isalnum() or ch in "+/"))), None)
        if bad is not None:
            return f"Illegal base64 character {ord(bad):x}"
    return None


def _pem_block(label: str, body: str) -> str:
    """A block OpenSSL reads: a value written on one line (a .properties file's continued lines) has
    its base64 joined by spaces, which Kafka's parser skips and OpenSSL's does not."""
    data = re.sub(r"\s+", "", body)
    lines = "".join(data[at:at + 64] + "\n" for at in range(0, len(data), 64))
    return f"-----BEGIN {label}-----\n{lines}-----END {label}-----\n"


def _load_pem_key_store(context: ssl.SSLContext, chain: str, key: str, key_password: str | None,
                        head: str, failure: str) -> None:
    # Kafka reads the key first, then the chain (PemStore.createKeyStoreFromPem)
    keys = [(label, body) for label, body in _blocks(key) if label.endswith("PRIVATE KEY")]
    if not keys:
        raise _refused(head, f"{failure}: No matching PRIVATE KEY entries in PEM file")
    if len(keys) != 1:
        raise _refused(head, f"{failure}: Expected one private key, but found {len(keys)}")
    (label, body), = keys
    wanted = "ENCRYPTED PRIVATE KEY" if key_password is not None else "PRIVATE KEY"
    if label != wanted:
        # Kafka reads PKCS#8 only, decrypting it exactly when a key password is given
        reader = "ssl.key.password asks for" if key_password is not None else "Kafka reads"
        raise _refused(head, f"{failure}: Private key could not be loaded: a {label} where {reader} "
                             f"a PKCS#8 {wanted} (openssl pkcs8 -topk8 converts one)")
    certificates = [body for label, body in _blocks(chain) if label == "CERTIFICATE"]
    if not certificates:
        raise _refused(head, f"{failure}: {_NO_CERTIFICATE}")
    problem = _base64_problem([body, *certificates])
    if problem is not None:
        raise _refused(head, f"{failure}: {problem}")
    pem = "".join(_pem_block("CERTIFICATE", cert) for cert in certificates) + _pem_block(label, body)
    _load_chain(context, pem, key_password, head, failure)


def _load_chain(context: ssl.SSLContext, pem: str, key_password: str | None, head: str,
                failure: str) -> None:
    """Load a certificate chain and its key (PEM text) into ``context``."""
    # Python's ssl loads a certificate chain from a file only: one private to this process, gone at once.
    with tempfile.TemporaryDirectory(prefix="kafkapy-tls-") as directory:
        store = os.path.join(directory, "keystore.pem")
        descriptor = os.open(store, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(descriptor, "w", encoding="ascii") as out:
            out.write(pem)
        try:
            context.load_cert_chain(store, password=key_password)
        except (ssl.SSLError, ValueError) as exc:
            # OpenSSL's "PEM lib" is the key it could not read: with a password, one it did not open
            reason = ("the private key cannot be decrypted with ssl.key.password"
                      if key_password is not None and "PEM lib" in str(exc) else str(exc))
            raise _refused(head, f"{failure}: {reason}") from None


def _load_pem_trust_store(context: ssl.SSLContext, pem: str, head: str, failure: str | None) -> None:
    """``failure`` heads the reason for a file's store, as Kafka's; inline certificates have none
    (Kafka passes their parser's refusal on as it is)."""
    opening = f"{failure}: " if failure else ""
    certificates = [body for label, body in _blocks(pem) if label == "CERTIFICATE"]
    if not certificates:
        raise _refused(head, opening + _NO_CERTIFICATE)
    problem = _base64_problem(certificates)
    if problem is not None:
        raise _refused(head, f"{opening or 'Invalid PEM truststore configs: '}{problem}")
    try:
        context.load_verify_locations(cadata="".join(_pem_block("CERTIFICATE", cert)
                                                     for cert in certificates))
    except (ssl.SSLError, ValueError) as exc:
        raise _refused(head, f"{opening or 'Invalid PEM truststore configs: '}{exc}") from None
