"""PersistentMap against a dict: every operation gives the dict's answer, no map ever changes once
made, and ``changed_keys`` between any two maps is the plain comparison's answer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.store.persistent import LEAF_SIZE, PersistentMap, changed_keys


class Key:
    """A key whose hash the test picks: small hashes crowd few slots (deep tries, leaves past the
    hash's bits), equal hashes on distinct keys are collisions."""

    def __init__(self, name: int, hashed: int) -> None:
        self.name = name
        self.hashed = hashed

    def __hash__(self) -> int:
        return self.hashed

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other.name == self.name

    def __repr__(self) -> str:
        return f"Key({self.name}, {self.hashed:#x})"


# Keys named 0-59 with hashes from a small pool: many share all 64 bits (collisions), many share
# long prefixes (so leaves split several levels down), some are negative (Python hashes are).
HASHES = (0, 1, 32, 1 << 40, (1 << 64) - 1, -1, -2, 7 << 5, 7 << 10, 12345678901234567)
keys = st.builds(lambda n: Key(n, HASHES[n % len(HASHES)] ^ (n // len(HASHES) << 15)),
                 st.integers(0, 59))
values = st.integers(0, 3)


def plain_diff(old: dict[Any, Any], new: dict[Any, Any]) -> set[Any]:
    missing = object()
    return {k for k in old.keys() | new.keys() if old.get(k, missing) != new.get(k, missing)}


class AgainstADict(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.map: PersistentMap[Key, int] = PersistentMap()
        self.dict: dict[Key, int] = {}
        self.kept: list[tuple[PersistentMap[Key, int], dict[Key, int]]] = []  # snapshots, as made

    @rule(key=keys, value=values)
    def set(self, key: Key, value: int) -> None:
        self.map = self.map.set(key, value)
        self.dict[key] = value

    @rule(key=keys)
    def delete(self, key: Key) -> None:
        if key in self.dict:
            self.map = self.map.delete(key)
            del self.dict[key]
        else:
            with pytest.raises(KeyError):
                self.map.delete(key)

    @rule(changes=st.dictionaries(keys, values, max_size=12), removed=st.lists(keys, max_size=4))
    def update(self, changes: dict[Key, int], removed: list[Key]) -> None:
        self.map = self.map.update(changes, removed)
        self.dict.update(changes)
        for key in removed:
            self.dict.pop(key, None)

    @rule()
    def rebuild(self) -> None:
        """A map built from scratch: equal, but sharing nothing with the one before."""
        self.map = PersistentMap(self.dict)

    @rule(content=st.dictionaries(keys, values, max_size=30))
    def replace(self, content: dict[Key, int]) -> None:
        """Whole new content, as a re-reading store gets it: what stayed is shared."""
        before = self.map
        self.map = self.map.updated_to(content)
        self.dict = dict(content)
        assert changed_keys(before, self.map) == plain_diff(dict(before.iter_items()), content)

    @rule()
    def keep(self) -> None:
        self.kept.append((self.map, dict(self.dict)))

    @invariant()
    def reads_as_the_dict(self) -> None:
        assert len(self.map) == len(self.dict)
        assert dict(self.map.iter_items()) == self.dict
        assert sorted(self.map, key=lambda k: k.name) == sorted(self.dict, key=lambda k: k.name)
        for name in range(60):
            for key in (Key(name, HASHES[name % len(HASHES)] ^ (name // len(HASHES) << 15)),):
                assert self.map.get(key, -1) == self.dict.get(key, -1)
                assert (key in self.map) == (key in self.dict)
        assert self.map == self.dict

    @invariant()
    def snapshots_never_change(self) -> None:
        for snapshot, content in self.kept:
            assert dict(snapshot.iter_items()) == content and len(snapshot) == len(content)

    @precondition(lambda self: bool(self.kept))
    @invariant()
    def changed_keys_is_the_plain_diff(self) -> None:
        for snapshot, content in self.kept[-3:]:
            assert changed_keys(snapshot, self.map) == plain_diff(content, self.dict)
            assert changed_keys(self.map, snapshot) == plain_diff(self.dict, content)
            assert changed_keys(content, self.dict) == plain_diff(content, self.dict)


TestAgainstADict = AgainstADict.TestCase
TestAgainstADict.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@given(st.dictionaries(st.tuples(st.text(max_size=3), st.integers(0, 5)), st.integers(), max_size=200))
def test_real_keys_read_back(content: dict[tuple[str, int], int]) -> None:
    built: PersistentMap[tuple[str, int], int] = PersistentMap(content)
    assert dict(built.iter_items()) == content and len(built) == len(content)
    for key, value in content.items():
        assert built[key] == value


def test_an_update_shares_all_but_one_path() -> None:
    """The reason for the structure: one write among 10,000 keys copies a few small nodes, and
    the comparison of the two maps finds exactly the key written without visiting the others."""
    before: PersistentMap[tuple[str, int], int] = PersistentMap({("t", p): p for p in range(10_000)})
    after = before.set(("t", 5), -5)
    assert changed_keys(before, after) == {("t", 5)}
    assert type(before._root) is tuple and type(after._root) is tuple
    shared = sum(1 for a, b in zip(before._root, after._root) if a is b)
    assert shared == 31  # every root slot but the written key's is the same object
    assert len(after) == 10_000 and after[("t", 5)] == -5 and before[("t", 5)] == 5


def test_a_leaf_splits_past_its_size() -> None:
    crowded = PersistentMap({Key(n, n << 5): n for n in range(LEAF_SIZE + 1)})  # one root slot
    assert type(crowded._root) is tuple
    assert dict(crowded.iter_items()) == {Key(n, n << 5): n for n in range(LEAF_SIZE + 1)}
