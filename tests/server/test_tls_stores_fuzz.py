"""Fuzzing the TLS store settings (a listener's ssl.keystore.*/ssl.truststore.*, a CLI's
--command-config): any mix of types, locations, passwords and inline PEM text, the PEM good, cut,
with a character changed or of another kind, and PKCS12 files good or damaged, loads or is refused
in one ConfigError line opened by the listener; never another exception."""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.server.config import ConfigError
from kafkapy.server.tls_stores import read_key_store, read_trust_store

HEAD = "invalid SSL settings for listener SSL"
PASSWORD = "store-secret"


@pytest.fixture(scope="module")
def material() -> Iterator[dict[str, str]]:
    """Good PEM text, and the files a location may name (good, damaged, missing), by a short name."""
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    chain = "".join(blob.bytes().decode() for blob in leaf.cert_chain_pems)
    p12 = pkcs12.serialize_key_and_certificates(b"k", key, None, None,  # type: ignore[arg-type]
                                                serialization.BestAvailableEncryption(PASSWORD.encode()))
    with tempfile.TemporaryDirectory() as directory:
        files = {"pem": (key_pem + chain).encode(), "p12": p12, "p12-cut": p12[:len(p12) // 2],
                 "jks": b"\xfe\xed\xfe\xed" + bytes(20), "binary": b"\xff\xfe\x00", "empty": b""}
        found = {"key": key_pem, "chain": chain, "missing": str(Path(directory) / "missing")}
        for name, data in files.items():
            (Path(directory) / name).write_bytes(data)
            found[name] = str(Path(directory) / name)
        yield found


@st.composite
def _pem(draw: st.DrawFn, good: str) -> str:
    """The PEM text as given, cut, with one character changed (to any, non-ASCII too), or on one line."""
    how = draw(st.sampled_from(["as is", "cut", "change", "one line", "other"]))
    if how == "cut":
        return good[:draw(st.integers(0, len(good)))]
    if how == "change":
        at = draw(st.integers(0, len(good) - 1))
        return good[:at] + draw(st.characters(blacklist_categories=["Cs"])) + good[at + 1:]
    if how == "one line":
        return good.replace("\n", " ")
    if how == "other":
        return draw(st.text(max_size=30))
    return good


_TYPES = st.none() | st.sampled_from(["PEM", "pem", "JKS", "PKCS12", "BKS", ""])
_LOCATIONS = st.none() | st.sampled_from(["pem", "p12", "p12-cut", "jks", "binary", "empty", "missing"])
_PASSWORDS = st.none() | st.sampled_from([PASSWORD, "wrong", "", "é", "\udcff"])
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(data=st.data(), kind=st.sampled_from(["keystore", "truststore"]))
def test_any_store_settings_load_or_are_refused_in_one_line(material: dict[str, str], data: st.DataObject,
                                                            kind: str) -> None:
    chosen: dict[str, str | None] = {
        f"ssl.{kind}.type": data.draw(_TYPES), f"ssl.{kind}.password": data.draw(_PASSWORDS),
        "ssl.key.password": data.draw(_PASSWORDS)}
    location = data.draw(_LOCATIONS)
    chosen[f"ssl.{kind}.location"] = None if location is None else material[location]
    if kind == "keystore":
        chosen["ssl.keystore.key"] = data.draw(st.none() | _pem(material["key"]))
        chosen["ssl.keystore.certificate.chain"] = data.draw(st.none() | _pem(material["chain"]))
    else:
        chosen["ssl.truststore.certificates"] = data.draw(st.none() | _pem(material["chain"]))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if kind == "keystore" else ssl.PROTOCOL_TLS_CLIENT)
    read = read_key_store if kind == "keystore" else read_trust_store
    try:
        read(context, chosen.get, HEAD)
    except ConfigError as refused:
        assert str(refused).startswith(HEAD + ": ") and "\n" not in str(refused), refused


@pytest.mark.parametrize("kind", ["keystore", "truststore"])
def test_a_certificate_with_a_character_outside_base64_is_refused_as_kafka_refuses_it(
        material: dict[str, str], kind: str) -> None:
    """What the fuzz found: a character that is not ASCII in a certificate's body was a
    UnicodeEncodeError (key store) or a TypeError (trust store) out of Python's ssl."""
    chain = material["chain"].replace("\n", "\n\x80", 1)
    if kind == "keystore":
        chosen = {"ssl.keystore.type": "PEM", "ssl.keystore.key": material["key"],
                  "ssl.keystore.certificate.chain": chain}
        context, read = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), read_key_store
    else:
        chosen = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": chain}
        context, read = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), read_trust_store
    with pytest.raises(ConfigError) as refused:
        read(context, chosen.get, HEAD)
    assert str(refused.value) == f"{HEAD}: Invalid PEM {kind} configs: Illegal base64 character 80"
