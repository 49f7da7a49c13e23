"""Kafka's ``sasl.jaas.config`` values: one JAAS login module entry, parsed.

Kafka reads the value with Java's StreamTokenizer (JaasConfig): a login module class name, a
control flag (required, requisite, sufficient, optional), ``key=value`` options whose values are
words or double-quoted strings, and a closing semicolon; exactly one entry per value. Anything else
is one ConfigError naming the key, never a traceback.
"""

from __future__ import annotations

import re

import attrs

from kafkapy.server.config import ConfigError

__all__ = ["JaasEntry", "parse_jaas_config"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")  # javax.security.auth.login
# One token: a quoted string (backslash escapes a character), a word, '=', ';', or whitespace.
# StreamTokenizer's word characters as JaasConfig sets them up: letters, digits, and -_$.
_TOKEN = re.compile(r'\s+|"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_$.\-]+)|(=)|(;)|(.)', re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


@attrs.frozen
class JaasEntry:
    """One login module: its class, its control flag, and its options in order."""

    login_module: str
    flag: str
    options: dict[str, str]


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    """(kind, value) pairs: kind is "word", "string", "=" or ";"."""
    out: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(text):
        quoted, word, equals, semicolon, other = match.groups()
        if quoted is not None:
            out.append(("string", _ESCAPE.sub(r"\1", quoted)))
        elif word is not None:
            out.append(("word", word))
        elif equals is not None:
            out.append(("=", equals))
        elif semicolon is not None:
            out.append((";", semicolon))
        elif other is not None:
            what = "an unterminated quoted value" if other == '"' else f"unexpected character {other!r}"
            raise ConfigError(f"invalid value for {key}: {what}")
    return out


def parse_jaas_config(text: str, key: str) -> JaasEntry:
    """The one login module entry in ``text``; ConfigError naming ``key`` if it is malformed."""
    tokens = _tokens(text, key)
    entries: list[JaasEntry] = []
    position = 0
    while position < len(tokens):
        kind, module = tokens[position]
        if kind != "word":
            raise ConfigError(f"invalid value for {key}: expected a login module class name, got {module!r}")
        if position + 1 >= len(tokens) or tokens[position + 1][1].lower() not in CONTROL_FLAGS:
            raise ConfigError(f"invalid value for {key}: the login module {module} needs a control flag "
                              f"({', '.join(CONTROL_FLAGS)})")
        flag = tokens[position + 1][1].lower()
        position += 2
        options: dict[str, str] = {}
        while True:
            if position >= len(tokens):
                raise ConfigError(f"invalid value for {key}: the login module entry does not end with ';'")
            kind, name = tokens[position]
            if kind == ";":
                position += 1
                break
            if (kind != "word" or position + 2 >= len(tokens) or tokens[position + 1][0] != "="
                    or tokens[position + 2][0] not in ("word", "string")):
                raise ConfigError(f"invalid value for {key}: expected name=value or ';' at {name!r}")
            options[name] = tokens[position + 2][1]
            position += 3
        entries.append(JaasEntry(module, flag, options))
    if len(entries) != 1:
        raise ConfigError(f"invalid value for {key}: it has {len(entries)} login modules, should be 1")
    return entries[0]
