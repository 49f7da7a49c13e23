"""Number options typed as Kafka's tools type them (Java short, int, long): a value past the type
is a usage error naming the option, as in Kafka's tools, not an EncodeError traceback once the
request is built (each option below was one)."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.cli import main
from kafkapy.client import ClientError, parse_bootstrap
from kafkapy.commands._numbers import java_int, java_long, java_short

BOOTSTRAP = ("--bootstrap-server", "127.0.0.1:1")  # never reached: the arguments are refused first


@pytest.mark.parametrize(("argv", "java"), [
    (["topics", *BOOTSTRAP, "--create", "--topic", "t", "--partitions", str(2**31)], "int"),
    (["topics", *BOOTSTRAP, "--alter", "--topic", "t", "--partitions", str(2**40)], "int"),
    (["leader-election", *BOOTSTRAP, "--election-type", "preferred", "--topic", "t", "--partition",
      str(-(2**31) - 1)], "int"),
    (["transactions", *BOOTSTRAP, "list", "--duration-filter", str(2**63)], "long"),
    (["features", *BOOTSTRAP, "upgrade", "--feature", "metadata.version", "--version", str(2**15)], "short"),
    (["transactions", *BOOTSTRAP, "abort", "--topic", "t", "--partition", "0", "--producer-id", "1",
      "--producer-epoch", str(2**15), "--coordinator-epoch", "0"], "short"),
    (["groups", *BOOTSTRAP, "--reset-offsets", "--group", "g", "--topic", "t", "--to-offset", "1_000"],
     "long"),
])
def test_a_number_past_its_java_type_is_a_usage_error(argv: list[str], java: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"is not a Java {java}" in err and len(err.strip().splitlines()) <= 2


@given(st.integers(-(2**70), 2**70).map(str) | st.text("0123456789+-_ x", max_size=8))
def test_any_text_is_a_number_of_the_type_or_refused(text: str) -> None:
    for parse, bits in ((java_short, 16), (java_int, 32), (java_long, 64)):
        try:
            value = parse(text)
        except argparse.ArgumentTypeError:
            continue
        assert -(1 << (bits - 1)) <= value < 1 << (bits - 1) and value == int(text)


@given(st.lists(st.sampled_from(["127.0.0.1", "[::1]", "h", "", ":", ","]) | st.text(max_size=4), max_size=3)
       .map("".join).flatmap(lambda host: st.tuples(st.just(host), st.sampled_from(
           ["9092", "0", "65536", "²", "٣", "x", "", "-1"]) | st.text(max_size=4))))
def test_a_bootstrap_server_is_addresses_or_one_line_naming_it(host_and_port: tuple[str, str]) -> None:
    """HOST:PORT as Kafka's tools take it; a port in digits int() cannot read (a superscript two,
    a digit to str.isdigit) is refused by the same line as any other, not by int()'s ValueError."""
    text = ":".join(host_and_port)
    try:
        addresses = parse_bootstrap(text)
    except ClientError as refused:
        assert str(refused).startswith("--bootstrap-server ") and str(refused).endswith(" is not HOST:PORT")
    else:
        assert addresses and all(0 < port < 65536 for _, port in addresses)


@pytest.mark.parametrize("name", ["x", "²", "1.5"])
def test_a_broker_entity_that_is_no_id_is_a_usage_error(name: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before anything connects (the bootstrap server is nobody), in its words."""
    code = main(["configs", *BOOTSTRAP, "--entity-type", "brokers", "--entity-name", name, "--describe"])
    err = capsys.readouterr().err
    assert code == 2 and f"the broker must be an integer id, not {name!r}" in err, (code, err)
