"""OAUTHBEARER for the CLI tools with tokens from an OAuth/OIDC provider (KIP-768's client side).

A Java tool whose ``sasl.login.callback.handler.class`` is Kafka's OAuthBearerLoginCallbackHandler
gets its token from ``sasl.oauthbearer.token.endpoint.url``: an ``http(s):`` URL is the provider's
token endpoint, called with RFC 6749's client_credentials grant (the JAAS options ``clientId`` and
``clientSecret`` as HTTP Basic authentication, ``scope`` in the form body); a ``file:`` URL names a
file holding a token, read once. The token then passes Kafka's light client-side checks
(LoginAccessTokenValidator: three sections, an ``exp``, a subject, well-formed scopes; the signature
is the broker's business) before it is sent. kafkapy's tools do the same from the same properties.

The https endpoint is trusted as Kafka trusts it: through the JAAS entry's own ``ssl.truststore.*``
options (JaasOptionsUtils), else the system's CAs; the tool's top-level ``ssl.*`` keys are the
broker connection's. Retries follow Kafka's Retry: exponential from ``sasl.login.retry.backoff.ms``
for at most ``sasl.login.retry.backoff.max.ms``, except for the HTTP statuses Kafka deems final
(401, 403...). A token is fetched once and shared by every connection a command makes; a command
that outlives 80% of its lifetime (Kafka's default ``sasl.login.refresh.window.factor``) fetches a
new one for its next connection.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from kafkapy.client import ClientError
from kafkapy.commands._oauthbearer import check_extensions
from kafkapy.server.config import ConfigError
from kafkapy.server.sasl import base64url
from kafkapy.server.sasl.settings import jaas_trust_context

__all__ = ["HANDLER_KEY", "LOGIN_HANDLERS", "LoginToken", "OidcLogin", "TokenEndpointError",
           "format_authorization_header", "format_error_message", "format_request_body",
           "validate_login_token"]

HANDLER_KEY = "sasl.login.callback.handler.class"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
DEPRECATED_LOGIN_HANDLER = ("org.apache.kafka.common.security.oauthbearer.secured."
                            "OAuthBearerLoginCallbackHandler")
LOGIN_HANDLERS = (LOGIN_HANDLER, DEPRECATED_LOGIN_HANDLER)
TOKEN_ENDPOINT_KEY = "sasl.oauthbearer.token.endpoint.url"
CONNECT_TIMEOUT_KEY = "sasl.login.connect.timeout.ms"
READ_TIMEOUT_KEY = "sasl.login.read.timeout.ms"
RETRY_BACKOFF_KEY = "sasl.login.retry.backoff.ms"
RETRY_BACKOFF_MAX_KEY = "sasl.login.retry.backoff.max.ms"
SUB_CLAIM_KEY = "sasl.oauthbearer.sub.claim.name"
SCOPE_CLAIM_KEY = "sasl.oauthbearer.scope.claim.name"
HEADER_URLENCODE_KEY = "sasl.oauthbearer.header.urlencode"
CLIENT_ID_OPTION, CLIENT_SECRET_OPTION, SCOPE_OPTION = "clientId", "clientSecret", "scope"
EXTENSION_PREFIX = "extension_"
DEFAULT_RETRY_BACKOFF_MS = 100
DEFAULT_RETRY_BACKOFF_MAX_MS = 10_000
# Kafka leaves unset login timeouts to the JVM, which waits for ever; a command line tool should not.
DEFAULT_TIMEOUT_MS = 10_000
REFRESH_WINDOW_FACTOR = 0.8
# The statuses HttpAccessTokenRetriever does not retry: asking again will not change the answer.
UNRETRYABLE_STATUSES = frozenset({400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414,
                                  415, 501, 505})
MAX_RESPONSE_BODY_LENGTH = 1000
_LONG_MAX = 2**63 - 1


class TokenEndpointError(Exception):
    """The token endpoint did not give a token; ``final`` when asking again would not help."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


@attrs.frozen
class LoginToken:
    """A token that passed Kafka's client-side checks, with the claims they read."""

    value: str
    expiration_ms: int
    subject: str
    scopes: frozenset[str]
    issued_at_ms: int | None


def _java_url_encode(text: str) -> str:
    """Java's URLEncoder (UTF-8): letters, digits and ``.-*_`` stay, a space is ``+``."""
    return urllib.parse.quote_plus(text, safe="*").replace("~", "%7E")


def _sanitize(name: str, value: str | None) -> str:
    if value is None:
        raise ValueError(f"The value for {name} must be non-null")
    if not value:
        raise ValueError(f"The value for {name} must be non-empty")
    if not value.strip():
        raise ValueError(f"The value for {name} must not contain only whitespace")
    return value.strip()


def format_authorization_header(client_id: str, client_secret: str, urlencode: bool = False) -> str:
    """HTTP Basic credentials as Kafka sends them: ``id:secret`` in standard Base64, each part
    URL-encoded first only when ``sasl.oauthbearer.header.urlencode`` asks (KIP-1025; off by default)."""
    client_id = _sanitize("the token endpoint request client ID parameter", client_id)
    client_secret = _sanitize("the token endpoint request client secret parameter", client_secret)
    if urlencode:
        client_id, client_secret = _java_url_encode(client_id), _java_url_encode(client_secret)
    return "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()


def format_request_body(scope: str | None) -> str:
    """The form body: the grant, and the scope (trimmed, URL-encoded) when there is one."""
    body = "grant_type=client_credentials"
    if scope is not None and scope.strip():
        body += "&scope=" + _java_url_encode(scope.strip())
    return body


def _json_text(value: Any) -> str:
    """A JSON node as Jackson's toString writes it ("" for a missing one)."""
    return "" if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def format_error_message(body: str | None) -> str:
    """RFC 6749 section 5.2's error answer, as Kafka shows it: ``{"error" - "description"}``."""
    if body is None or not body.strip():
        return "{}"
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return "{" + body + "}"
    for error, description in (("error", "error_description"), ("errorCode", "errorSummary")):
        if isinstance(document, dict) and error in document:
            return f"{{{_json_text(document[error])} - {_json_text(document.get(description))}}}"
    return body


def parse_access_token(body: str) -> str:
    """The ``access_token`` of a token endpoint's answer."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        snippet = body if len(body) <= MAX_RESPONSE_BODY_LENGTH else (
            f"{body[:MAX_RESPONSE_BODY_LENGTH]} (trimmed to first {MAX_RESPONSE_BODY_LENGTH} characters "
            f"out of {len(body)} total)")
        raise TokenEndpointError(f"The token endpoint response is not JSON: ({snippet})",
                                 final=True) from None
    token = document.get("access_token") if isinstance(document, dict) else None
    try:
        return _sanitize("the token endpoint response's access_token JSON attribute",
                         token if isinstance(token, str) else None)
    except ValueError as exc:
        raise TokenEndpointError(str(exc), final=True) from None


def _java_split_dots(token: str) -> list[str]:
    """Java's ``token.split("\\\\.")``: trailing empty sections dropped. (Not the broker's helper: that
    module needs ``cryptography``, an extra the tools must run without.)"""
    parts = token.split(".")
    while parts and not parts[-1]:
        parts.pop()
    return parts


_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))  # String.trim() strips every char <= ' '


def _java_trim(text: str) -> str:
    """Java's ``String.trim()``: Python's strip() takes other characters (U+0085, U+2028, ...) and
    leaves control characters Java takes, so a token would be cut differently."""
    return text.strip(_JAVA_WHITESPACE)


def _claim_name(name: str, value: str) -> str:
    if not value:
        raise ValueError(f"{name} value must be non-empty")
    if not _java_trim(value):
        raise ValueError(f"{name} value must not contain only whitespace")
    return _java_trim(value)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _number_ms(claims: Mapping[str, Any], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} value must be a number; value given was {_json_text(value)}")
    if isinstance(value, float) and not math.isfinite(value):  # 1e400 reads as infinity
        return _LONG_MAX if value > 0 else -_LONG_MAX
    return int(value) * 1000  # Java's Number.longValue(): a fraction is dropped


def validate_login_token(token: str, sub_claim_name: str = "sub",
                         scope_claim_name: str = "scope") -> LoginToken:
    """Kafka's LoginAccessTokenValidator: ValueError with its message when ``token`` is not a
    three-section JWT whose payload has an ``exp``, a subject and well-formed scopes."""
    scope_claim_name = _claim_name(SCOPE_CLAIM_KEY, scope_claim_name)
    sub_claim_name = _claim_name(SUB_CLAIM_KEY, sub_claim_name)
    token = _java_trim(token)
    if not token:
        raise ValueError("Empty JWT provided; expected three sections (header, payload, and signature)")
    sections = _java_split_dots(token)
    if len(sections) != 3:
        raise ValueError(f"Malformed JWT provided ({token}); expected three sections (header, payload, "
                         f"and signature), but {len(sections)} sections provided")
    for section, name in zip(sections, ("header", "payload", "signature"), strict=True):
        if not _java_trim(section):
            raise ValueError("Malformed JWT provided; expected at least three sections (header, payload, "
                             f"and signature), but {name} section missing")
    try:
        payload = base64url.decode(_java_trim(sections[1]))
    except ValueError:
        raise ValueError("Could not validate the access token: malformed Base64 URL encoded value") from None
    try:
        claims = json.loads(payload, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise ValueError("Could not validate the access token: malformed JSON") from None
    if not isinstance(claims, dict):
        claims = {}
    raw_scope = claims.get(scope_claim_name)
    scope_items = ([raw_scope] if isinstance(raw_scope, str)
                   else raw_scope if isinstance(raw_scope, list) else [])
    scopes: set[str] = set()
    for item in scope_items:
        if not isinstance(item, str):
            raise ValueError(f"{scope_claim_name} value must be non-null")
        item = _claim_name(scope_claim_name, item)
        if item in scopes:
            raise ValueError(f"{scope_claim_name} value must not contain duplicates - {item} already present")
        scopes.add(item)
    expiration = _number_ms(claims, "exp")
    if expiration is None:
        raise ValueError("exp value must be non-null")
    if expiration < 0:
        raise ValueError(f'exp value must be non-negative; value given was "{expiration}"')
    subject = claims.get(sub_claim_name)
    if subject is None:
        raise ValueError(f"{sub_claim_name} value must be non-null")
    if not isinstance(subject, str):
        raise ValueError(f"{sub_claim_name} value must be a string; value given was {_json_text(subject)}")
    subject = _claim_name(sub_claim_name, subject)
    issued_at = _number_ms(claims, "iat")
    if issued_at is not None and issued_at < 0:
        raise ValueError(f'iat value must be null or non-negative; value given was "{issued_at}"')
    return LoginToken(token, expiration, subject, frozenset(scopes), issued_at)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"{exc.reason}: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(getattr(exc, "strerror", None) or exc)


@attrs.frozen
class TokenEndpoint:
    """An http(s) token endpoint and how to ask it (HttpAccessTokenRetriever)."""

    url: str
    authorization: str = attrs.field(repr=False)
    body: str
    ssl_context: ssl.SSLContext | None
    connect_timeout_s: float
    read_timeout_s: float
    retry_backoff_ms: int
    retry_backoff_max_ms: int

    def retrieve(self, sleep: Callable[[float], None] = time.sleep) -> str:
        """The access token; TokenEndpointError with Kafka's message for the first failure when the
        retries are spent (or at once for a final one)."""
        end = time.monotonic() + self.retry_backoff_max_ms / 1000
        attempt, first_error = 0, None
        while True:
            attempt += 1
            try:
                return parse_access_token(self._post())
            except TokenEndpointError as exc:
                first_error = first_error or exc
                if exc.final:
                    break
            wait_s = min(self.retry_backoff_ms * 2 ** (attempt - 1) / 1000, end - time.monotonic())
            if wait_s <= 0:
                break
            sleep(wait_s)
        raise first_error

    def _post(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        connection: http.client.HTTPConnection
        if parts.scheme.lower() == "https":
            connection = http.client.HTTPSConnection(parts.hostname or "", parts.port,
                                                     timeout=self.connect_timeout_s, context=self.ssl_context)
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port,
                                                    timeout=self.connect_timeout_s)
        try:
            connection.connect()
            if connection.sock is not None:
                connection.sock.settimeout(self.read_timeout_s)
            path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
            connection.request("POST", path, body=self.body.encode(), headers={
                "Accept": "application/json", "Authorization": self.authorization,
                "Cache-Control": "no-cache", "Content-Type": "application/x-www-form-urlencoded"})
            response = connection.getresponse()
            status, body = response.status, response.read().decode("utf-8", errors="replace")
        except (OSError, http.client.HTTPException) as exc:
            raise TokenEndpointError(_reason(exc)) from None
        finally:
            connection.close()
        if status in (200, 201):
            if not body:
                raise TokenEndpointError("The token endpoint response was unexpectedly empty despite "
                                         f"response code {status} from {self.url} and error message {{}}")
            return body
        error = format_error_message(body)
        if status in UNRETRYABLE_STATUSES:
            raise TokenEndpointError(f"The response code {status} and error response {error} was encountered "
                                     "reading the token endpoint response; will not attempt further retries",
                                     final=True)
        raise TokenEndpointError(f"The unexpected response code {status} and error message {error} was "
                                 "encountered reading the token endpoint response")


def _milliseconds(properties: Mapping[str, str], key: str, default: int, source: str) -> int:
    raw = properties.get(key, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ClientError(f"{source}: {key} is not a whole number of milliseconds: {raw!r}") from None
    if value < 0:
        raise ClientError(f"{source}: {key} must be non-negative, not {value}")
    return value


def _required_option(options: Mapping[str, str], name: str, source: str) -> str:
    value = options.get(name)
    if value is None:
        raise ClientError(f"{source}: The OAuth configuration option {name} value must be non-null")
    if not value.strip():
        raise ClientError(f"{source}: The OAuth configuration option {name} value must not contain "
                          "only whitespace")
    return value.strip()


class OidcLogin:
    """One tool run's OIDC login: where its token comes from, the checks it must pass, the token
    held, and the SASL extensions (the ``extension_*`` JAAS options) sent with it."""

    def __init__(self, source: str, where: str, fetch: Callable[[], str], sub_claim_name: str,
                 scope_claim_name: str, extensions: Mapping[str, str], endpoint: TokenEndpoint | None = None,
                 now_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.source = source
        self.endpoint = endpoint  # None: a file's token
        self.where = where
        self._fetch = fetch
        self.sub_claim_name = sub_claim_name
        self.scope_claim_name = scope_claim_name
        self.extensions = dict(extensions)
        self._now_ms = now_ms
        self._token: LoginToken | None = None
        self._refresh_at_ms = 0.0

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], options: Mapping[str, str], source: str,
                        now_ms: Callable[[], float] = lambda: time.time() * 1000) -> OidcLogin:
        """The login the properties and JAAS options describe; ClientError naming what is wrong.
        A ``file:`` token is read here, once, as Kafka reads it when the client starts."""
        url = properties.get(TOKEN_ENDPOINT_KEY, "").strip()
        if not url:
            raise ClientError(f"{source}: The OAuth configuration option {TOKEN_ENDPOINT_KEY} value must be "
                              f"non-null ({properties.get(HANDLER_KEY, '').strip()} needs it)")
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https", "file"):
            raise ClientError(f"{source}: The OAuth configuration option {TOKEN_ENDPOINT_KEY} contains a "
                              f"URL ({url}) that contains an invalid protocol ({scheme or 'none'}); only "
                              "\"http\", \"https\", and \"file\" protocol are supported")
        extensions = {name[len(EXTENSION_PREFIX):]: value for name, value in options.items()
                      if name.startswith(EXTENSION_PREFIX)}
        check_extensions(extensions, source)
        claims = (properties.get(SUB_CLAIM_KEY, "sub"), properties.get(SCOPE_CLAIM_KEY, "scope"))
        for key, value in zip((SUB_CLAIM_KEY, SCOPE_CLAIM_KEY), claims, strict=True):
            try:
                _claim_name(key, value)
            except ValueError as exc:
                raise ClientError(f"{source}: {exc}") from None
        if scheme == "file":
            path = Path(urllib.request.url2pathname(parts.path)).absolute()
            return cls(source, url, cls._file_token(path, url, source), *claims, extensions, now_ms=now_ms)
        endpoint = cls._endpoint(url, scheme, properties, options, source)
        return cls(source, url, endpoint.retrieve, *claims, extensions, endpoint, now_ms)

    @staticmethod
    def _file_token(path: Path, url: str, source: str) -> Callable[[], str]:
        if not path.exists():
            raise ClientError(f"{source}: The OAuth configuration option {TOKEN_ENDPOINT_KEY} contains a "
                              f"file ({path}) that doesn't exist")
        if path.is_dir():
            raise ClientError(f"{source}: The OAuth configuration option {TOKEN_ENDPOINT_KEY} references a "
                              f"directory ({path}), not a file")
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ClientError(f"{source}: cannot read the token file {path} ({url}): "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
        return lambda: token

    @staticmethod
    def _endpoint(url: str, scheme: str, properties: Mapping[str, str], options: Mapping[str, str],
                  source: str) -> TokenEndpoint:
        client_id = _required_option(options, CLIENT_ID_OPTION, source)
        client_secret = _required_option(options, CLIENT_SECRET_OPTION, source)
        urlencode = properties.get(HEADER_URLENCODE_KEY, "false").strip().lower() == "true"
        try:
            context = jaas_trust_context(options, "sasl.jaas.config") if scheme == "https" else None
        except ConfigError as exc:
            raise ClientError(f"{source}: {exc}") from None
        backoff = _milliseconds(properties, RETRY_BACKOFF_KEY, DEFAULT_RETRY_BACKOFF_MS, source)
        backoff_max = _milliseconds(properties, RETRY_BACKOFF_MAX_KEY, DEFAULT_RETRY_BACKOFF_MAX_MS, source)
        if backoff_max < backoff:
            raise ClientError(f"{source}: {RETRY_BACKOFF_MAX_KEY} ({backoff_max}) is less than "
                              f"{RETRY_BACKOFF_KEY} ({backoff})")
        connect_ms = _milliseconds(properties, CONNECT_TIMEOUT_KEY, DEFAULT_TIMEOUT_MS, source)
        read_ms = _milliseconds(properties, READ_TIMEOUT_KEY, DEFAULT_TIMEOUT_MS, source)
        return TokenEndpoint(url, format_authorization_header(client_id, client_secret, urlencode),
                             format_request_body(options.get(SCOPE_OPTION)), context, connect_ms / 1000,
                             read_ms / 1000, backoff, backoff_max)

    def token(self) -> LoginToken:
        """The token to log in with: the one held, or a new one once 80% of its lifetime is gone."""
        now = self._now_ms()
        if self._token is None or now >= self._refresh_at_ms:
            try:
                raw = self._fetch()
            except TokenEndpointError as exc:
                raise ClientError(f"{self.source}: no token from {self.where}: {exc}") from None
            try:
                token = validate_login_token(raw, self.sub_claim_name, self.scope_claim_name)
            except ValueError as exc:
                raise ClientError(f"{self.source}: the token from {self.where} is refused: {exc}") from None
            start = token.issued_at_ms if token.issued_at_ms is not None else now
            self._token = token
            self._refresh_at_ms = start + (token.expiration_ms - start) * REFRESH_WINDOW_FACTOR
        return self._token
