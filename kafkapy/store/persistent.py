"""An immutable mapping whose updates share structure with the map they came from.

Theory of operation
-------------------
The store's watches hand every change of the topics, or of the partition states, to their readers
as the whole mapping: a reader on another thread keeps using the one it got (a snapshot), and a
reader that wants to act on what changed compares two of them. With plain dicts both cost O(N)
per change, since the store copied the whole dict on every write and a comparison looked at every
key: N changes at N partitions cost O(N^2), half of creating 2,000 topics on three brokers.

``PersistentMap`` is a hash array mapped trie (Bagwell's HAMT; CPython's contextvars and Clojure's
maps are built the same way). An interior node is a tuple of ``WIDTH`` slots picked by ``BITS``
bits of the key's hash; a leaf is a small dict of the keys whose hashes share the bits above it,
split into a node once it holds more than ``LEAF_SIZE``. Nothing is changed once made: an update
copies the path from the root to one leaf and shares every other node with the map it came from.

* ``set``, ``delete``: O(log N) (about three 32-slot tuples and one leaf at 10,000 keys), never O(N).
* ``changed_keys(old, new)`` walks both tries and skips each subtree they share (the same object),
  so between a map and one made from it by k updates it costs O(k log N). Two maps that share
  nothing are compared key by key: the answer is the same, only slower.
* Reads go through a few tuple indexings: ``get`` at 12,000 keys took 0.6 µs against a dict's
  0.03 µs (measured 2026-11-26), so Metadata for 12,000 partitions pays about 7 ms more. Iteration
  collects the leaves into a list first (no generator per level).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from typing import Any, Generic, TypeAlias, TypeVar, cast, overload

__all__ = ["PersistentMap", "changed_keys"]

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

BITS = 5
WIDTH = 1 << BITS  # 32 slots per node, as Bagwell's and CPython's HAMTs have
_SLOT = WIDTH - 1
HASH_BITS = 64  # hashes are taken as unsigned 64-bit numbers; past them, leaves just grow
LEAF_SIZE = 8  # a leaf copied on a write is at most this big
_HASH_MASK = (1 << HASH_BITS) - 1

# A subtree: None (no keys), a leaf (dict), or a node (a tuple of WIDTH subtrees).
_Tree: TypeAlias = "dict[Any, Any] | tuple[Any, ...] | None"
_MISSING: Any = object()


def _hash(key: object) -> int:
    return hash(key) & _HASH_MASK


def _build(entries: list[tuple[int, Any, Any]], shift: int) -> _Tree:
    """A subtree of ``entries`` ((hash, key, value), keys distinct), the hash bits below ``shift``
    already used up."""
    if not entries:
        return None
    if len(entries) <= LEAF_SIZE or shift >= HASH_BITS:
        return {key: value for _, key, value in entries}
    slots: list[list[tuple[int, Any, Any]]] = [[] for _ in range(WIDTH)]
    for entry in entries:
        slots[(entry[0] >> shift) & _SLOT].append(entry)
    return tuple(_build(slot, shift + BITS) for slot in slots)


def _set(tree: _Tree, h: int, shift: int, key: Any, value: Any) -> tuple[_Tree, bool]:
    """``tree`` with ``key`` set, and whether the key is new."""
    if tree is None:
        return {key: value}, True
    if type(tree) is dict:
        added = key not in tree
        leaf = dict(tree)
        leaf[key] = value
        if len(leaf) > LEAF_SIZE and shift < HASH_BITS:
            return _build([(_hash(k), k, v) for k, v in leaf.items()], shift), added
        return leaf, added
    node = cast(tuple[_Tree, ...], tree)
    slot = (h >> shift) & _SLOT
    child, added = _set(node[slot], h, shift + BITS, key, value)
    return (*node[:slot], child, *node[slot + 1:]), added


def _delete(tree: _Tree, h: int, shift: int, key: Any) -> _Tree:
    """``tree`` without ``key`` (which it holds); a subtree left empty becomes None."""
    if type(tree) is dict:
        leaf = dict(tree)
        del leaf[key]
        return leaf or None
    node = cast(tuple[_Tree, ...], tree)
    slot = (h >> shift) & _SLOT
    child = _delete(node[slot], h, shift + BITS, key)
    rebuilt = (*node[:slot], child, *node[slot + 1:])
    return rebuilt if child is not None or any(s is not None for s in rebuilt) else None


def _find(tree: _Tree, h: int, key: Any) -> Any:
    while type(tree) is tuple:
        tree = tree[h & _SLOT]
        h >>= BITS
    return _MISSING if tree is None else cast(dict[Any, Any], tree).get(key, _MISSING)


def _leaves(tree: _Tree) -> list[dict[Any, Any]]:
    """Every leaf under ``tree``, in slot order (a list: walked with a stack, not generators)."""
    leaves: list[dict[Any, Any]] = []
    stack = [tree]
    while stack:
        top = stack.pop()
        if top is None:
            continue
        if type(top) is dict:
            leaves.append(top)
        else:
            stack.extend(reversed(cast(tuple[_Tree, ...], top)))
    return leaves


def _diff_flat(old: Mapping[Any, Any], new: Mapping[Any, Any], out: set[Any]) -> None:
    for key, value in old.items():
        found = new.get(key, _MISSING)
        if found is not value and (found is _MISSING or found != value):
            out.add(key)
    out.update(key for key in new if key not in old)


def _diff(old: _Tree, new: _Tree, out: set[Any]) -> None:
    """The keys of either subtree (the same hash prefix in both) whose presence or value differs."""
    if old is new:
        return
    if type(old) is tuple and type(new) is tuple:
        for a, b in zip(old, new):
            if a is not b:
                _diff(a, b, out)
        return
    # A leaf against a node, or a side with nothing: compare the keys of the two subtrees.
    _diff_flat({k: v for leaf in _leaves(old) for k, v in leaf.items()},
               {k: v for leaf in _leaves(new) for k, v in leaf.items()}, out)


class PersistentMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``set``, ``delete`` and ``update`` return new maps (module docstring)."""

    __slots__ = ("_length", "_root")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        flat = dict(items)
        self._root: _Tree = _build([(_hash(k), k, v) for k, v in flat.items()], 0)
        self._length = len(flat)

    @classmethod
    def _of(cls, root: _Tree, length: int) -> PersistentMap[K, V]:
        made = cls.__new__(cls)
        made._root = root
        made._length = length
        return made

    def __getitem__(self, key: K) -> V:
        found = _find(self._root, _hash(key), key)
        if found is _MISSING:
            raise KeyError(key)
        return cast(V, found)

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: V | D) -> V | D: ...

    def get(self, key: K, default: Any = None) -> Any:
        # _find inlined: the view's readers (Metadata, leadership) call this once per partition.
        tree = self._root
        h = hash(key) & _HASH_MASK
        while type(tree) is tuple:
            tree = tree[h & _SLOT]
            h >>= BITS
        return default if tree is None else cast(dict[Any, Any], tree).get(key, default)

    def __contains__(self, key: object) -> bool:
        return _find(self._root, _hash(key), key) is not _MISSING

    def __iter__(self) -> Iterator[K]:
        if not self._length:
            return iter(())  # a cluster without topics is common (tests), and its walk not free
        keys: list[K] = []
        for leaf in _leaves(self._root):
            keys.extend(leaf)
        return iter(keys)

    def __len__(self) -> int:
        return self._length

    def iter_items(self) -> Iterator[tuple[K, V]]:
        """The items without a lookup per key (a Mapping's ``items()`` would look each one up)."""
        if not self._length:
            return iter(())
        items: list[tuple[K, V]] = []
        for leaf in _leaves(self._root):
            items.extend(leaf.items())
        return iter(items)

    def items(self) -> ItemsView[K, V]:
        return _Items(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def __eq__(self, other: object) -> bool:
        """Two maps of one lineage compare by what they do not share (a watch compares each state
        with the last it delivered)."""
        if isinstance(other, PersistentMap):
            return self._root is other._root or (self._length == other._length and
                                                  not changed_keys(self, other))
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking: a Mapping is not hashable

    def __repr__(self) -> str:
        return f"PersistentMap({dict(self.iter_items())!r})"

    def set(self, key: K, value: V) -> PersistentMap[K, V]:
        root, added = _set(self._root, _hash(key), 0, key, value)
        return self._of(root, self._length + added)

    def delete(self, key: K) -> PersistentMap[K, V]:
        """Without ``key``; KeyError if it has none."""
        h = _hash(key)
        if _find(self._root, h, key) is _MISSING:
            raise KeyError(key)
        return self._of(_delete(self._root, h, 0, key), self._length - 1)

    def update(self, changes: Mapping[K, V] = {}, removed: Iterable[K] = ()) -> PersistentMap[K, V]:
        """With ``changes`` set and the keys ``removed`` gone (those it does not have are ignored)."""
        root, length = self._root, self._length
        for key, value in changes.items():
            root, added = _set(root, _hash(key), 0, key, value)
            length += added
        for key in removed:
            h = _hash(key)
            if _find(root, h, key) is not _MISSING:
                root, length = _delete(root, h, 0, key), length - 1
        return self._of(root, length)

    def updated_to(self, content: Mapping[K, V]) -> PersistentMap[K, V]:
        """A map equal to ``content`` that shares with this one every key whose value is the same
        (``is`` or ``==``): how a reader that re-reads whole states keeps its snapshots of one
        lineage. O(len(content)) comparisons, but only the changes are copied."""
        changes: dict[K, V] = {}
        added = 0
        for key, value in content.items():
            found = self.get(key, _MISSING)
            if found is not value and (found is _MISSING or found != value):
                changes[key] = value
                added += found is _MISSING
        # Keys it lacks, only looked for when the counts say there are some.
        removed = [key for key in self if key not in content] if len(self) + added > len(content) else []
        return self.update(changes, removed) if changes or removed else self


class _Items(ItemsView[K, V]):
    """``items()`` that walks the leaves, not a lookup per key."""

    _mapping: PersistentMap[K, V]

    def __iter__(self) -> Iterator[tuple[K, V]]:
        return self._mapping.iter_items()


class _Values(ValuesView[V]):
    _mapping: PersistentMap[Any, V]

    def __iter__(self) -> Iterator[V]:
        values: list[V] = []
        for leaf in _leaves(self._mapping._root):
            values.extend(leaf.values())
        return iter(values)


def changed_keys(old: Mapping[K, V], new: Mapping[K, V]) -> set[K]:
    """The keys whose presence or value (by ``==``) differs between ``old`` and ``new``: fast for
    two PersistentMaps of one lineage (the module docstring), correct for any two mappings."""
    out: set[K] = set()
    if isinstance(old, PersistentMap) and isinstance(new, PersistentMap):
        _diff(old._root, new._root, out)
    elif old is not new:
        _diff_flat(old, new, out)
    return out
