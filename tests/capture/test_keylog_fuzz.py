"""Fuzzing the NSS key log reader: any file, torn or binary lines among the good ones, gives the
secrets of every good line, or KeyLogError in one line when no line is good; never another
exception. A file that grows is read again where a lookup misses."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from kafkapy.capture.keylog import KEY_LOG_LABELS, KeyLog, KeyLogError

_GOOD = st.builds(lambda label, random, secret: (label, random, secret),
                  st.sampled_from(sorted(KEY_LOG_LABELS)), st.binary(min_size=32, max_size=32),
                  st.binary(min_size=1, max_size=48))
# What else shares a key log: other labels, comments, torn lines, digits of other scripts, bytes.
_NOISE = st.sampled_from(["# a comment", "EXPORTER_SECRET " + "00" * 32 + " 11", "RSA x y", "",
                          "CLIENT_RANDOM " + "00" * 31 + " 11", "CLIENT_RANDOM " + "0" * 64,
                          "CLIENT_RANDOM " + "²" * 64 + " 11", "CLIENT_RANDOM " + "00" * 32 + " ",
                          "CLIENT_RANDOM " + "zz" * 32 + " 11", "CLIENT_RANDOM " + "00" * 32 + " 1"]
                         ).map(str.encode) | st.binary(max_size=40).filter(lambda b: b"\n" not in b)


def _line(entry: tuple[str, bytes, bytes]) -> bytes:
    label, random, secret = entry
    return f"{label} {random.hex()} {secret.hex()}".encode()


@given(good=st.lists(_GOOD, max_size=4), noise=st.lists(_NOISE, max_size=4), data=st.data())
def test_every_good_line_is_read_and_the_rest_skipped(good: list[tuple[str, bytes, bytes]],
                                                      noise: list[bytes], data: st.DataObject) -> None:
    lines = [_line(e) for e in good] + noise
    order = data.draw(st.permutations(range(len(lines))))
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "keys.log"
        path.write_bytes(b"\n".join(lines[i] for i in order) + b"\n")
        try:
            keys = KeyLog(path)
        except KeyLogError as refused:
            assert not good and "\n" not in str(refused)
            return
        expected: dict[bytes, dict[str, bytes]] = {}
        for label, random, secret in (good[i] for i in order if i < len(good)):  # the last line wins
            expected.setdefault(random, {})[label] = secret
        for random, secrets in expected.items():
            assert keys.secrets(random) == secrets
        assert len(keys) == len(expected)


@given(first=_GOOD, later=_GOOD, torn=st.binary(max_size=20).filter(lambda b: b"\n" not in b))
def test_a_growing_file_is_read_again_on_a_miss(first: tuple[str, bytes, bytes],
                                                later: tuple[str, bytes, bytes], torn: bytes) -> None:
    assume(first[1] != later[1])  # a lookup that hits reads nothing more
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "keys.log"
        path.write_bytes(_line(first) + b"\n" + torn)  # a last line still being written
        keys = KeyLog(path)
        with path.open("ab") as out:
            out.write(b"\n" + _line(later) + b"\n")
        label, random, secret = later
        found = keys.secrets(random, [label])
        assert found is not None and found[label] == secret
