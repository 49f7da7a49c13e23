"""Patterns from requests and command lines (kafkapy/server/patterns.py): RE2 for what Kafka runs on
RE2/J, RE2 or a refusal for what Kafka runs on java.util.regex (``re`` only for the tools); never an
exception other than PatternError, whose description is one line; matching in linear time; the
same matches as ``re`` on the syntax both read alike."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kafkapy.server.patterns import PatternError, Regex, compile_java, compile_re2

_pieces = st.sampled_from(["a", ".", "*", "+", "?", "(", ")", "[", "]", "{", "}", ",", "|", "\\", "^", "$",
                           "(?", "<", "=", "!", "P", "1", "9" * 12, "{4294967296}", "&&", ":", "U", "Q", "E",
                           "\udc80", "é"])

CATASTROPHIC = "(a+)+$"
SLOW_FOR_RE = "a" * 30 + "b"


def _compilers() -> list[tuple[str, object]]:
    return [("re2", compile_re2), ("java", lambda t: compile_java(t, fallback=False)),
            ("java+re", lambda t: compile_java(t, fallback=True))]


@pytest.mark.parametrize("name, compiler", _compilers())
@given(text=st.text(max_size=30) | st.lists(_pieces, max_size=25).map("".join)
       | st.integers(1, 3000).map(lambda depth: "(" * depth + "a" + ")" * depth))
@example(text="a{4294967296}")  # OverflowError from re.compile
@example(text="(" * 1200 + ")" * 1200)  # RecursionError from re.compile
@example(text="a\udc80")  # no UTF-8 for RE2
@settings(max_examples=200, deadline=None)
def test_any_text_compiles_or_is_a_pattern_error(name: str, compiler: object, text: str) -> None:
    try:
        pattern = compiler(text)  # type: ignore[operator]
    except PatternError as refused:
        assert refused.description and "\n" not in refused.description
        assert refused.pattern == text
        return
    assert isinstance(pattern, Regex) and pattern.pattern == text
    for subject in ("", "a", "aa\n", "\udc80", "é"):
        assert pattern.matches(subject) in (True, False)


@pytest.mark.parametrize("pattern, description", [
    ("t(", "missing closing )"),
    ("t)", "missing closing )"),
    ("[t", "missing closing ]"),
    ("(?=x)t", "invalid or unsupported Perl syntax"),
    ("(?<!x)t", "invalid or unsupported Perl syntax"),
    (r"(t)\1", "invalid escape sequence"),
    ("t**", "invalid nested repetition operator"),
    ("t++", "invalid nested repetition operator"),
    ("*t", "missing argument to repetition operator"),
    ("t{1001}", "invalid repeat count"),
    ("t{4294967296}", "invalid repeat count"),  # RE2 alone would read it as text; RE2/J refuses
    ("[z-a]", "invalid character class range"),
    ("t\\", "trailing backslash at end of expression"),
])
def test_re2_refuses_what_re2j_refuses_in_its_words(pattern: str, description: str) -> None:
    with pytest.raises(PatternError) as refused:
        compile_re2(pattern)
    assert refused.value.description == description


@pytest.mark.parametrize("pattern, subject", [
    (r"\pL+", "héllo"),
    (r"\p{Greek}+", "αβγ"),
    (r"\Qa.b\E", "a.b"),
    ("(?i)ORDERS-.*", "orders-eu"),
    ("(?P<name>t)x", "tx"),
    ("[[:alpha:]]+", "abc"),
    ("a{2}|b{,3}", "b{,3}"),  # RE2/J like Perl: "{,3}" is literal text
])
def test_re2_accepts_what_re2j_accepts(pattern: str, subject: str) -> None:
    assert compile_re2(pattern).matches(subject)


def test_matching_is_linear_in_the_input_however_the_pattern_backtracks() -> None:
    for regex in (compile_re2(CATASTROPHIC), compile_java(CATASTROPHIC, fallback=False),
                  compile_java("(x|x)*y", fallback=True)):
        assert regex.engine == "re2"
        started = time.monotonic()
        assert not regex.matches(SLOW_FOR_RE)
        assert not regex.matches("a" * 100_000 + "b")
        assert not regex.matches("x" * 100_000)
        assert time.monotonic() - started < 2


@pytest.mark.parametrize("pattern, subject", [("(?=x)x", "x"), (r"(t)\1", "tt"), ("x++", "xx"),
                                              ("(?>x)", "x"), ("(?<!a)b", "b")])
def test_java_only_syntax_is_refused_by_the_broker_and_runs_on_re_for_the_tools(pattern: str,
                                                                                 subject: str) -> None:
    with pytest.raises(PatternError):
        compile_java(pattern, fallback=False)
    fallback = compile_java(pattern, fallback=True)
    assert fallback.engine == "re" and fallback.matches(subject)


@pytest.mark.parametrize("pattern", ["[a-z&&[^x]]", "[[a]]", "[a[:digit:]]", "(?U)a", "(?iU:a)"])
def test_what_neither_engine_reads_as_java_is_refused_even_for_the_tools(pattern: str) -> None:
    for fallback in (False, True):
        with pytest.raises(PatternError, match="not supported"):
            compile_java(pattern, fallback=fallback)
    compile_java(r"[a\[]\&\&(?i)x", fallback=False)  # escaped, they are what they say in both


def test_the_java_dialect_is_whole_input_and_ascii_like_java() -> None:
    assert compile_java("a|ab", fallback=False).matches("ab")  # matches(), not leftmost-first find
    assert not compile_java("orders", fallback=False).matches("orders-eu")
    assert not compile_java(r"\w+", fallback=False).matches("héllo")  # Java's \w is ASCII
    assert not compile_java(r"(?=h)\w+", fallback=True).matches("héllo")  # and so on re
    assert compile_java("[]a]+", fallback=False).matches("]a")


# Patterns both RE2 and re read alike: literals, any, classes, groups, alternation, repeats (greedy
# and lazy), anchors. Matching must agree with re.fullmatch (ASCII, as Java).
_atom = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", r"\d", r"\w", r"\s", "[a-c]", r"\.", "x", r"\b"])


def _regexes() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        quantifier = st.sampled_from(["*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{0,2}?", "{2,}"])
        return st.one_of(
            st.tuples(inner, quantifier).map(lambda t: f"(?:{t[0]}){t[1]}"),
            st.tuples(inner, quantifier).map(lambda t: f"({t[0]}){t[1]}"),
            st.lists(inner, min_size=2, max_size=3).map("".join),
            st.lists(inner, min_size=2, max_size=3).map("|".join).map(lambda alt: f"(?:{alt})"),
        )
    return st.recursive(_atom, extend, max_leaves=6).map(lambda body: body)


@given(body=_regexes(), anchored=st.booleans(),
       subjects=st.lists(st.text(alphabet="ab1x. \n", max_size=8), min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_re2_agrees_with_re_on_syntax_both_read_alike(body: str, anchored: bool, subjects: list[str]) -> None:
    text = f"^{body}$" if anchored else body
    reference = re.compile(text, re.ASCII)
    for regex in (compile_re2(text), compile_java(text, fallback=False)):
        assert regex.engine == "re2"
        for subject in subjects:
            assert regex.matches(subject) == (reference.fullmatch(subject) is not None), (text, subject)


def test_compiled_patterns_kept_for_reuse_stay_within_a_budget() -> None:
    from kafkapy.server import patterns

    for n in range(patterns._CACHE_SIZE + 10):
        assert compile_re2(f"t{n}.*").matches(f"t{n}-x")
    assert len(patterns._cache) == patterns._CACHE_SIZE
    assert compile_re2("t0.*").matches("t0")  # evicted, compiled again
    for n in range(12):  # about 350,000 instructions each: a client could send many
        compile_re2(rf"\pL{{300}}{n}")
    assert patterns._cached_instructions <= patterns._CACHE_INSTRUCTIONS
    assert sum(size for _, size in patterns._cache.values()) == patterns._cached_instructions
    assert r"\pL{300}11" in patterns._cache  # the newest kept, the oldest gone
    assert r"\pL{300}0" not in patterns._cache


def test_a_pattern_past_re2s_memory_budget_is_refused_not_compiled_at_any_cost() -> None:
    with pytest.raises(PatternError, match="pattern too large"):
        compile_re2(r"\pL{1000}")
    with pytest.raises(PatternError, match="pattern too large"):
        compile_java(r"\pL{1000}", fallback=False)
