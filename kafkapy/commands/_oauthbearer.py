"""OAUTHBEARER for the CLI tools: the unsecured token Kafka's tools make from their JAAS options.

A Java tool given ``sasl.mechanism=OAUTHBEARER`` and ``OAuthBearerLoginModule`` with
``unsecuredLogin*`` options (and no token endpoint) logs in with an unsecured JWS it builds itself
(OAuthBearerUnsecuredLoginCallbackHandler): ``exp`` and ``iat`` from the clock and the lifetime,
the other claims and the SASL extensions from the options. kafkapy's tools do the same, so one
``--command-config`` file serves both, and send RFC 7628's client first message.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping

from kafkapy.client import ClientError
from kafkapy.server.sasl import base64url

__all__ = ["check_extensions", "client_first_message", "unsecured_login"]

_PREFIX = "unsecuredLogin"
_STRING_CLAIM = _PREFIX + "StringClaim_"
_NUMBER_CLAIM = _PREFIX + "NumberClaim_"
_LIST_CLAIM = _PREFIX + "ListClaim_"
_EXTENSION = _PREFIX + "Extension_"
_RESERVED_CLAIMS = frozenset({"iat", "exp"})  # always the handler's own
_DEFAULT_LIFETIME_S = "3600"
SEPARATOR = "\x01"
# RFC 7628's key and value grammar, which Kafka's extension check applies; "auth" is the token's.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


def _list_claim(value: str) -> list[str]:
    """Kafka's list claim option: its first character separates the elements that follow; an empty
    element at either end or between two separators adds one "" at the end, as Kafka's does."""
    if len(value) <= 1:
        return []
    separator, text = value[0], value[1:]
    elements = [element for element in text.split(separator) if element]
    if text.startswith(separator) or text.endswith(separator) or separator * 2 in text:
        elements.append("")
    return elements


def _claim_name(option: str, prefix: str, source: str) -> str:
    name = option[len(prefix):]
    if name in _RESERVED_CLAIMS:
        raise ClientError(f"{source}: Cannot explicitly set the '{name}' claim")
    return name


def unsecured_login(options: Mapping[str, str], source: str,
                    now_s: Callable[[], float] = time.time) -> tuple[str, dict[str, str]]:
    """The unsecured JWS and the extensions ``options`` ask for; ClientError naming ``source`` when
    they cannot make one (no principal claim, a reserved claim, a bad number or extension)."""
    if not options or all(name.startswith(_EXTENSION) for name in options):
        raise ClientError(f"{source}: OAuthBearerLoginModule needs unsecuredLogin* options to make a token "
                          "(a token endpoint is not something kafkapy's tools can call)")
    principal_claim = options.get(_PREFIX + "PrincipalClaimName", "").strip() or "sub"
    try:
        lifetime_s = int(options.get(_PREFIX + "LifetimeSeconds", _DEFAULT_LIFETIME_S))
    except ValueError:
        raise ClientError(f"{source}: {_PREFIX}LifetimeSeconds is not a whole number of seconds") from None
    # Whole milliseconds, as Kafka's: a finer iat can be "after" a broker's now in milliseconds.
    issued = int(now_s() * 1000) / 1000
    claims: dict[str, object] = {"exp": issued + lifetime_s, "iat": issued}
    for option, value in options.items():
        if option.startswith(_STRING_CLAIM) and len(option) > len(_STRING_CLAIM):
            claims[_claim_name(option, _STRING_CLAIM, source)] = value
        elif option.startswith(_NUMBER_CLAIM) and len(option) > len(_NUMBER_CLAIM):
            try:
                claims[_claim_name(option, _NUMBER_CLAIM, source)] = float(value)
            except ValueError:
                raise ClientError(f"{source}: {option} is not a number: {value!r}") from None
        elif option.startswith(_LIST_CLAIM) and len(option) > len(_LIST_CLAIM):
            claims[_claim_name(option, _LIST_CLAIM, source)] = _list_claim(value)
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise ClientError(f"{source}: no '{principal_claim}' claim to name the principal (set "
                          f"{_STRING_CLAIM}{principal_claim})")
    extensions = {option[len(_EXTENSION):]: value for option, value in options.items()
                  if option.startswith(_EXTENSION)}
    check_extensions(extensions, source)
    header = base64url.encode(json.dumps({"alg": "none"}).encode())
    return f"{header}.{base64url.encode(json.dumps(claims).encode())}.", extensions


def check_extensions(extensions: Mapping[str, str], source: str) -> None:
    """Kafka's OAuthBearerClientInitialResponse.validateExtensions, with its messages."""
    for key, value in extensions.items():
        if key == "auth" or not _EXTENSION_KEY.fullmatch(key):
            raise ClientError(f"{source}: Extension name {key} is invalid")
        if not _EXTENSION_VALUE.fullmatch(value):
            raise ClientError(f"{source}: Extension value ({value}) for extension {key} is invalid")


def client_first_message(token: str, extensions: Mapping[str, str]) -> bytes:
    """RFC 7628's client first message, as Kafka's OAuthBearerClientInitialResponse writes it:
    no authorization id, the token, then each extension."""
    pairs = "".join(f"{SEPARATOR}{key}={value}" for key, value in extensions.items())
    return f"n,,{SEPARATOR}auth=Bearer {token}{pairs}{SEPARATOR}{SEPARATOR}".encode()
