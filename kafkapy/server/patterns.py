"""Regular expressions that arrive in requests or on command lines, run in linear time.

The broker runs every request on one event loop, so a pattern a client sends must not be able to
stall it: Python's backtracking ``re`` takes minutes on ``(a+)+$`` against thirty ``a``s and a
``b``. RE2 (google-re2) matches in time linear in the input, whatever the pattern, and refuses
what needs backtracking (backreferences, lookaround, possessive quantifiers, atomic groups).

Two dialects, as Kafka has them:

* ``compile_re2``: Kafka compiles KIP-848's ``SubscribedTopicRegex`` with RE2/J. RE2 accepts and
  refuses the same syntax (RE2/J is a port of the same design), with one gap closed here: a repeat
  count too large to parse (``a{99999999}``) is RE2/J's "invalid repeat count", where RE2 would
  read the braces as literal text. ``PatternError.description`` is RE2/J's wording of the refusal
  (Kafka quotes it in its error message).
* ``compile_java``: client-metrics ``match`` patterns, ListTransactions' transactional-id pattern,
  the old consumer's white/black lists and the tools' topic filters are ``java.util.regex``, a
  backtracking engine with a wider syntax. A pattern RE2 accepts and reads as Java does runs on
  RE2. Two things RE2 (and ``re``) accept but read otherwise are refused, rather than matched
  differently: a ``[`` or ``&&`` inside a character class (Java's nested classes and
  intersections, RE2's literal characters or POSIX classes) and the ``U`` flag (Java's
  UNICODE_CHARACTER_CLASS, RE2's ungreedy). For a pattern RE2 refuses (Java-only syntax:
  lookaround, backreferences, possessive quantifiers, atomic groups...), the caller chooses:

  - the broker (``fallback=False``) refuses it, with the API's error for an invalid pattern.
    A guard for ``re`` cannot be had in-process: ``re`` holds the GIL for the whole match, so
    neither a timeout nor another thread can stop it, and no syntactic check both keeps every
    backtracking pattern out and lets useful ones in. Java-only syntax in these patterns is rare;
    a stalled broker is not.
  - a command-line tool (``fallback=True``) runs it on ``re`` (with ``re.ASCII``: Java's ``\\w``,
    ``\\d``, ``\\s``, ``\\b`` are ASCII unless asked otherwise): the pattern is the user's own and
    can only slow their own command.

Matching is Java's ``Matcher.matches()``: the whole input (RE2's full match finds a whole-input
match even when leftmost-first preference would stop earlier, as Java's backtracking does). Where
RE2 and Java still differ on syntax both accept: ``(?i)`` folds non-ASCII letters in RE2 (Java
only with UNICODE_CASE), ``.`` excludes only ``\\n`` in RE2 (Java also ``\\r``, U+0085, U+2028,
U+2029), ``$`` is the end of input in RE2 (Java also before a final line terminator).

RE2 budgets 8 MiB per compiled pattern: a larger program (``\\pL{1000}``) is refused ("pattern
too large - compile failed"), where RE2/J and Java would accept it. Compiled patterns are kept for
reuse within a budget of instructions (below), so none a client sends can pin much memory.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable
from typing import Literal

import attrs
import re2
from re2 import _re2  # the binding's core: its Python wrapper costs four times as much per match

__all__ = ["Engine", "PatternError", "Regex", "compile_java", "compile_re2"]

Engine = Literal["re2", "re"]

# RE2's refusals ("<what>: <where>") in RE2/J's words (Go's regexp/syntax error texts), longest
# first so "invalid character class range" is not read as "invalid character class".
_RE2J_DESCRIPTIONS: tuple[tuple[str, str], ...] = (
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class range"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid named capture group", "invalid named capture"),
    ("duplicate capture group name", "duplicate capture group name"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid repetition size", "invalid repeat count"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("missing ]", "missing closing ]"),
    ("missing )", "missing closing )"),
    ("unexpected )", "missing closing )"),  # RE2/J has no separate text for an unopened ")"
    ("trailing \\", "trailing backslash at end of expression"),
)
_INVALID_REPEAT = "invalid repeat count"
# RE2/J gives up on a repeat count of 8 digits or more (overflow guard); RE2 reads it as text.
_REPEAT = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")
_MAX_REPEAT_DIGITS = 7
_FLAG_GROUP = re.compile(r"\(\?([A-Za-z-]*)[:)]")

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr
_OPTIONS.longest_match = False  # leftmost-first, as RE2/J and Java choose among alternatives
_OPTIONS.never_capture = True  # only whether it matches is asked: no group spans to compute
_WHOLE = _re2.RE2.Anchor.ANCHOR_BOTH
_NO_MATCH = -1

# Compiled patterns kept for reuse: a group's regex is matched again on every heartbeat, and a
# large one (``\pL{300}``: 350,000 instructions, 150 ms to compile) would cost that each time.
# Kept within a budget of instructions: a topic regex is tens, and 256 large ones kept (each with
# its DFA up to RE2's 8 MiB) would be gigabytes a client chose. Oldest out first.
_CACHE_SIZE = 256
_CACHE_INSTRUCTIONS = 2_000_000  # RE2's ProgramSize, summed (40 of 360,000 sent: 5 kept, 90 MB peak RSS)
_cache: dict[str, tuple[Regex, int]] = {}
_cache_lock = threading.Lock()  # embedded brokers in one process each run their own loop thread
_cached_instructions = 0


class PatternError(ValueError):
    """A pattern the dialect refuses; ``description`` says why, in RE2/J's words where RE2 refused."""

    def __init__(self, pattern: str, description: str) -> None:
        super().__init__(f"invalid regular expression {pattern!r}: {description}")
        self.pattern = pattern
        self.description = description


@attrs.frozen
class Regex:
    """A compiled pattern: its text, the engine that runs it, and Java's whole-input match."""

    pattern: str
    engine: Engine
    _fullmatch: Callable[[str], bool] = attrs.field(eq=False, repr=False)

    def matches(self, text: str) -> bool:
        """Whether the whole of ``text`` matches (Java's ``Matcher.matches()``)."""
        return self._fullmatch(text)


@attrs.frozen
class _Reading:
    """What one pass over a pattern finds that RE2 alone would get wrong."""

    huge_repeat: bool  # a {n} RE2/J and Java refuse, RE2 takes literally
    reads_otherwise: bool  # nested class, class intersection or (?U): RE2 would not read it as Java


def _read(text: str) -> _Reading:
    """Scan ``text`` as a regex, skipping escapes and ``\\Q...\\E``, tracking character classes."""
    huge = otherwise = False
    in_class = False
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "\\":
            if text.startswith("\\Q", i):
                close = text.find("\\E", i + 2)
                i = end if close < 0 else close + 2
            else:
                i += 2
            continue
        if in_class:
            if char == "[":
                otherwise = True
                if text.startswith("[:", i) and (close := text.find(":]", i + 2)) >= 0:
                    i = close + 2  # RE2's POSIX class: its "]" does not close the outer class
                    continue
            elif text.startswith("&&", i):
                otherwise = True
            elif char == "]":
                in_class = False
            i += 1
            continue
        if char == "[":
            in_class = True
            i += 1
            if text.startswith("^", i):
                i += 1
            if text.startswith("]", i):
                i += 1  # a "]" first in a class is a member, in RE2, RE2/J and Java alike
            continue
        if char == "{" and (repeat := _REPEAT.match(text, i)):
            huge = huge or any(len(count) > _MAX_REPEAT_DIGITS for count in repeat.groups() if count)
        elif char == "(" and (flags := _FLAG_GROUP.match(text, i)):
            otherwise = otherwise or "U" in flags.group(1)
        i += 1
    return _Reading(huge, otherwise)


def _re2j_description(message: bytes) -> str:
    text = message.decode("utf-8", "replace")
    for re2_text, re2j_text in _RE2J_DESCRIPTIONS:
        if text.startswith(re2_text):
            return re2j_text
    return text.split("\n", 1)[0] or "invalid regular expression"


def _on_re2(text: str) -> Regex:
    """RE2's compile (or the one kept); PatternError in RE2/J's words when it refuses."""
    with _cache_lock:
        kept = _cache.get(text)
    if kept is not None:
        return kept[0]
    try:
        program = _re2.RE2(text.encode("utf-8"), _OPTIONS)
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 to hand RE2
        raise PatternError(text, "invalid UTF-8") from None
    if not program.ok():
        raise PatternError(text, _re2j_description(program.error()))

    def fullmatch(subject: str) -> bool:
        # surrogatepass: a lone surrogate in the subject cannot match, but must not raise
        data = subject.encode("utf-8", "surrogatepass")
        return program.Match(_WHOLE, data, 0, len(data))[0][0] != _NO_MATCH

    regex = Regex(text, "re2", fullmatch)
    _keep(text, regex, program.ProgramSize())
    return regex


def _keep(text: str, regex: Regex, size: int) -> None:
    global _cached_instructions
    if size > _CACHE_INSTRUCTIONS // 4:
        return  # one pattern never takes over the budget
    with _cache_lock:
        if text in _cache:
            return
        while _cache and (len(_cache) >= _CACHE_SIZE or _cached_instructions + size > _CACHE_INSTRUCTIONS):
            _cached_instructions -= _cache.pop(next(iter(_cache)))[1]
        _cache[text] = (regex, size)
        _cached_instructions += size


def compile_re2(text: str) -> Regex:
    """A pattern Kafka compiles with RE2/J (KIP-848 ``SubscribedTopicRegex``); PatternError for
    what RE2/J refuses."""
    if _read(text).huge_repeat:
        raise PatternError(text, _INVALID_REPEAT)
    return _on_re2(text)


def compile_java(text: str, *, fallback: bool) -> Regex:
    """A pattern Kafka compiles with ``java.util.regex``: on RE2 when RE2 reads it as Java does;
    otherwise on ``re`` when ``fallback`` (command-line tools only), else PatternError."""
    reading = _read(text)
    if reading.huge_repeat:
        raise PatternError(text, _INVALID_REPEAT)
    if reading.reads_otherwise:  # neither RE2 nor re reads these as Java does
        raise PatternError(text, "nested or intersected character classes and the U flag are not supported")
    try:
        return _on_re2(text)
    except PatternError:
        if not fallback:
            raise
    try:
        with warnings.catch_warnings():  # re's FutureWarnings about syntax it may read otherwise one day
            warnings.simplefilter("ignore", FutureWarning)
            compiled = re.compile(text, re.ASCII)
    except (re.error, OverflowError, RecursionError) as exc:
        # OverflowError: a repeat count past re's limit; RecursionError: thousands of nested groups
        raise PatternError(text, str(exc).split("\n", 1)[0]) from None
    return Regex(text, "re", lambda subject: compiled.fullmatch(subject) is not None)
