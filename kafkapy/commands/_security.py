"""``--command-config``: how the CLI tools connect to a secured broker, as Kafka's tools do.

The file is a Java client properties file, the one ``kafka-topics.sh --command-config`` reads:

* ``security.protocol``: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL;
* ``sasl.mechanism``: PLAIN (the default), SCRAM-SHA-256 or SCRAM-SHA-512, with the user and
  password in ``sasl.jaas.config``, Kafka's JAAS form
  (``org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";``,
  or ScramLoginModule); or OAUTHBEARER with OAuthBearerLoginModule's ``unsecuredLogin*`` options,
  the unsecured token Kafka's tools make (kafkapy.commands._oauthbearer), or, with
  ``sasl.login.callback.handler.class`` Kafka's OAuthBearerLoginCallbackHandler, a token from the
  OAuth/OIDC provider at ``sasl.oauthbearer.token.endpoint.url`` (kafkapy.commands._oidc_login);
* TLS: Kafka's trust and key stores, read by the broker's reader (kafkapy.server.tls_stores) with
  its checks and words: ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` (a PEM file)
  or ``ssl.truststore.certificates`` (PEM text), or a PKCS12 store (``PKCS12``, or the default
  ``JKS`` when the file is PKCS12) with ``ssl.truststore.password``; none at all trusts the
  system's CAs. A client certificate: ``ssl.keystore.type=PEM`` with ``ssl.keystore.location``
  (certificate chain and key in one PEM file) or inline ``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key``, and ``ssl.key.password`` for an encrypted key; or a PKCS12 key store with
  ``ssl.keystore.password``. ``ssl.endpoint.identification.algorithm=`` (empty) turns off host
  name checking, as in Kafka. A store in Java's own JKS format is refused, naming the conversion.

Keys the tools have no use for (``client.id``, timeouts...) are ignored, as Kafka's tools ignore
unknown ones. Every problem is one ClientError naming the file and the key.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import secrets
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafkapy.client import ClientError, SimpleClient, host_port_argument
from kafkapy.commands._oauthbearer import SEPARATOR, client_first_message, unsecured_login
from kafkapy.commands._oidc_login import HANDLER_KEY, LOGIN_HANDLERS, OidcLogin
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import ConfigError
from kafkapy.server.sasl.jaas import parse_jaas_config
from kafkapy.server.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkapy.server.sasl.scram import ScramMechanism, salted_password
from kafkapy.server.tls_stores import read_key_store, read_trust_store

__all__ = ["add_command_config", "add_connection_options", "client_options", "read_properties",
           "security_options"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
OAUTHBEARER = "OAUTHBEARER"
SASL_HANDSHAKE_VERSION = 1  # then SaslAuthenticate frames carry the tokens (KIP-152)
SASL_AUTHENTICATE_VERSION = 1


def add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--command-config", metavar="FILE", default=None,
                        help="client properties for a secured broker (security.protocol, sasl.mechanism, "
                             "sasl.jaas.config, ssl.truststore.*, ssl.keystore.*), as Kafka's tools "
                             "read them")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server, --command-config and --timeout, as Kafka's admin tools take them."""
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        type=host_port_argument)
    add_command_config(parser)
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="connect and read timeout, and how long retriable errors are retried "
                             "(default 10)")


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """SimpleClient keyword arguments for the tool's ``--command-config`` (none: plaintext)."""
    path = getattr(args, "command_config", None)
    return security_options(read_properties(path), path) if path else {}


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments, and
    a backslash at a line's end continuing it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise ClientError(f"cannot read --command-config {path}: {reason}") from None
    properties: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.lstrip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        separator = min((at for at in (line.find("="), line.find(":")) if at >= 0), default=-1)
        key, value = (line[:separator], line[separator + 1:]) if separator >= 0 else (line, "")
        properties[key.strip()] = value.strip()
    if pending:
        key, _, value = pending.partition("=")
        properties[key.strip()] = value.strip()
    return properties


def security_options(properties: Mapping[str, str], source: str = "--command-config") -> dict[str, Any]:
    """SimpleClient keyword arguments (``ssl_context``, ``authenticate``) for client properties."""
    protocol = properties.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientError(f"{source}: security.protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    options: dict[str, Any] = {}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = _ssl_context(properties, source)
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        options["authenticate"] = _sasl(properties, source)
    return options


def _ssl_context(properties: Mapping[str, str], source: str) -> ssl.SSLContext:
    """The client's TLS context: its stores as Kafka's clients read them (the broker's reader), the
    trust store alone trusted when there is one (Java's trust manager), else the system's CAs."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # checks the certificate and the host name

    def get(key: str) -> str | None:
        return properties.get(key) or None  # an empty value is no setting

    try:
        if not read_trust_store(context, get, source):
            context.load_default_certs()
        read_key_store(context, get, source)
    except ConfigError as exc:
        raise ClientError(str(exc)) from None
    if properties.get("ssl.endpoint.identification.algorithm", "https") == "":
        context.check_hostname = False
    return context


def _sasl(properties: Mapping[str, str], source: str) -> Callable[[SimpleClient], None]:
    mechanism = properties.get("sasl.mechanism", "PLAIN").upper()
    if mechanism not in ("PLAIN", OAUTHBEARER) and mechanism not in SCRAM_MECHANISMS:
        raise ClientError(f"{source}: sasl.mechanism {mechanism} is not one kafkapy's tools speak "
                          f"(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)")
    handler = properties.get(HANDLER_KEY, "").strip() if mechanism == OAUTHBEARER else ""
    if handler and handler not in LOGIN_HANDLERS:
        raise ClientError(f"{source}: {HANDLER_KEY} {handler} is not one kafkapy's tools can run "
                          f"(Kafka's {LOGIN_HANDLERS[0]} is; without one, an unsecured token)")
    if not properties.get("sasl.jaas.config"):
        needs = ("the clientId and clientSecret options" if handler else "the unsecuredLogin options"
                 ) if mechanism == OAUTHBEARER else "the username and password"
        raise ClientError(f"{source}: a SASL security.protocol needs sasl.jaas.config with {needs}")
    try:
        options = parse_jaas_config(properties["sasl.jaas.config"], "sasl.jaas.config").options
    except ConfigError as exc:
        raise ClientError(f"{source}: {exc}") from None
    if handler:
        login = OidcLogin.from_properties(properties, options, source)  # one token for every connection
        return lambda client: _oidc(client, login)
    if mechanism == OAUTHBEARER:
        unsecured_login(options, source)  # refused here, once, rather than at each connection
        return lambda client: _oauthbearer(client, *unsecured_login(options, source))
    username, password = options.get("username"), options.get("password")
    if username is None or password is None:
        raise ClientError(f"{source}: sasl.jaas.config has no username or no password option")
    if mechanism == "PLAIN":
        return lambda client: _plain(client, username, password)
    scram = SCRAM_MECHANISMS[mechanism]
    return lambda client: _scram(client, scram, username, password)


def _handshake(client: SimpleClient, mechanism: str) -> None:
    answer = client.request(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": mechanism})
    if answer["error_code"] != ErrorCode.NONE:
        offered = ", ".join(answer.get("mechanisms") or []) or "none"
        raise ClientError(f"{client.host}:{client.port} does not offer SASL mechanism {mechanism} "
                          f"(it offers {offered})")


def _authenticate(client: SimpleClient, token: bytes) -> bytes:
    answer = client.request(ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token})
    if answer["error_code"] != ErrorCode.NONE:
        message = answer.get("error_message") or ErrorCode(answer["error_code"]).name
        raise ClientError(f"{client.host}:{client.port} refused the login: {message}")
    return bytes(answer.get("auth_bytes") or b"")


def _plain(client: SimpleClient, username: str, password: str) -> None:
    _handshake(client, "PLAIN")
    _authenticate(client, b"\0" + username.encode() + b"\0" + password.encode())


def _oauthbearer(client: SimpleClient, token: str, extensions: Mapping[str, str]) -> None:
    """RFC 7628: the token in the first message; a refusal comes back as a JSON challenge with no
    error, which the client answers with a lone separator to hear the error itself."""
    _handshake(client, OAUTHBEARER)
    challenge = _authenticate(client, client_first_message(token, extensions))
    if challenge:
        _authenticate(client, SEPARATOR.encode())  # the broker's refusal: a ClientError
        raise ClientError(f"{client.host}:{client.port} refused the token: "
                          f"{challenge.decode(errors='replace')}")


def _oidc(client: SimpleClient, login: OidcLogin) -> None:
    """OAUTHBEARER with the provider's token; a refusal of a token past its ``exp`` says so, as the
    broker's own answer (invalid_token) does not."""
    token = login.token()
    try:
        _oauthbearer(client, token.value, login.extensions)
    except ClientError as exc:
        if token.expiration_ms <= time.time() * 1000:
            expired = datetime.datetime.fromtimestamp(token.expiration_ms / 1000, datetime.timezone.utc)
            raise ClientError(f"{exc} (the token from {login.where} expired at "
                              f"{expired.isoformat(timespec='seconds')})") from None
        raise


def _sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _scram(client: SimpleClient, mechanism: ScramMechanism, username: str, password: str) -> None:
    """RFC 5802's client side: client-first, server-first, client-final with the proof, and the
    server's signature checked."""
    _handshake(client, mechanism.name)
    nonce = base64.b64encode(secrets.token_bytes(24)).decode()
    first_bare = f"n={_sasl_name(username)},r={nonce}"
    server_first = _authenticate(client, f"n,,{first_bare}".encode()).decode(errors="replace")
    fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
    try:
        server_nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
    except (KeyError, ValueError):
        raise ClientError(f"{client.host}:{client.port} sent a malformed SCRAM challenge") from None
    if not server_nonce.startswith(nonce):
        raise ClientError(f"{client.host}:{client.port} sent a SCRAM nonce that does not extend ours")
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = mechanism.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={server_nonce}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = mechanism.hmac(mechanism.hash(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = _authenticate(client, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    expected = mechanism.hmac(mechanism.hmac(salted, b"Server Key"), auth_message)
    if final.decode(errors="replace") != f"v={base64.b64encode(expected).decode()}":
        raise ClientError(f"{client.host}:{client.port} did not prove it knows the SCRAM credential")
