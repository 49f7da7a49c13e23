"""Patterns from requests and command lines: compiled, or re.error; never another exception out of
re.compile (OverflowError for a huge repeat count, RecursionError for deep nesting), which failed
the handlers that compile them (ListTransactions, ConsumerGroupHeartbeat, client-metrics configs)."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from kafkapy.server.patterns import compile_pattern

_pieces = st.sampled_from(["a", ".", "*", "+", "?", "(", ")", "[", "]", "{", "}", ",", "|", "\\", "^", "$",
                           "(?", "<", "=", "!", "P", "1", "9" * 12, "{4294967296}"])


@given(st.text(max_size=30) | st.lists(_pieces, max_size=25).map("".join)
       | st.integers(1, 3000).map(lambda depth: "(" * depth + "a" + ")" * depth))
@example("a{4294967296}")  # OverflowError from re.compile
@example("(" * 1200 + ")" * 1200)  # RecursionError from re.compile
def test_any_text_compiles_or_is_re_error(text: str) -> None:
    try:
        pattern = compile_pattern(text)
    except re.error as refused:
        assert "\n" not in str(refused)
        return
    assert pattern.pattern == text
