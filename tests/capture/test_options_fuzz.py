"""Fuzzing the capture options a user types (kafka_ports, --bodies): each is a value or a ValueError
naming what was given and what is wanted, never int()'s own words."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kafkapy.capture.options import body_api_keys, port_numbers

# Numbers in other scripts' digits too: str.isdigit passes "²", which int() cannot read.
_WORDS = st.sampled_from(["0", "1", "9092", "65536", "-1", " 3 ", "²", "٣", "¼", "produce", "FETCH", "x", ""])
_ITEMS = _WORDS | st.text(max_size=6) | st.integers(-2, 70_000)


@given(st.lists(_ITEMS, max_size=3) | _ITEMS)
@example("9092\x1f")
def test_ports_are_ports_or_one_line_naming_the_value(ports: list[int | str] | int | str) -> None:
    try:
        found = port_numbers(ports)  # type: ignore[arg-type]  # a user's text, as Spark's option gives it
    except ValueError as refused:
        assert "is not a TCP port (1-65535)" in str(refused)
    else:
        assert all(0 < port < 65536 for port in found)


@given(st.lists(_ITEMS, max_size=3))
@example(["0\x1f"])  # blank to str.strip, not to int()
def test_bodies_are_api_keys_or_one_line_naming_the_api(bodies: list[int | str]) -> None:
    try:
        keys = body_api_keys(bodies)
    except ValueError as refused:
        assert str(refused).startswith("unknown API"), refused
    else:
        assert keys is not None and len(keys) <= len(bodies)


@pytest.mark.parametrize("text", ["²", "٣"])
def test_a_port_in_other_digits(text: str) -> None:
    """Arabic-Indic three is 3 to int() and to Java's parseInt; a superscript two is a digit to
    str.isdigit only, and no port."""
    if text == "٣":
        assert port_numbers(text) == (3,)
    else:
        with pytest.raises(ValueError, match="is not a TCP port"):
            port_numbers(text)
