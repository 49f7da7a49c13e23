"""Regular expressions that arrive in requests or on command lines (ListTransactions' id pattern,
KIP-848 subscription regexes, client-metrics match patterns, the tools' topic filters).

``re.compile`` refuses most bad patterns with ``re.error``, but a repeat count past its limit
(``a{4294967296}``) raises OverflowError and a few thousand nested groups RecursionError; either
failed the handler (a logged traceback, the connection closed) where Kafka answers the request
with its error. ``compile_pattern`` turns all three into ``re.error``.
"""

from __future__ import annotations

import re

__all__ = ["compile_pattern"]


def compile_pattern(text: str) -> re.Pattern[str]:
    """``re.compile(text)``; re.error for any pattern it cannot compile."""
    try:
        return re.compile(text)
    except (OverflowError, RecursionError) as exc:
        raise re.error(f"{type(exc).__name__}: {exc}") from None
