"""A second backend of the schema compiler: wire bytes straight to JSON text.

Theory of operation
-------------------
``StructCodec._emit_decoder`` turns a message at one version into Python that
builds ``Body`` dicts; writing those as JSON then costs more than decoding them
(the generic encoder is slow on many small dicts). For readers that only want
the JSON (capture rows, the Spark UDFs), this module walks the same codec tree
and emits functions that go from ``(buf, pos, end)`` to ``(text, pos)`` with no
dict in between: a run of fixed-width fields is one ``unpack_from`` and the
struct is one f-string with its keys baked in.

The output is, by construction and by test, the text the capture rows' encoder
writes for the Body the existing decoder builds: the same keys in the same order
(fields, then tagged fields at their defaults unless present, then the unknown
tags), bytes as base64, UUIDs as strings, floats as ``json.dumps`` writes them,
strings escaped by ``encode_basestring`` (``json.dumps(ensure_ascii=False)``),
records through :func:`~kafkapy.protocol.records_json.records_json_at` or, when
not decoded, as base64 of their raw bytes. Errors are the same too: every value
is read by the primitives' own ``emit_read`` (the same checks in the same order,
so the same DecodeError at the same offset), and only then turned into text.

The top-level function also returns what a capture row wants besides the text,
so it never needs a Body: the top-level ``error_code`` (an int, else None) and
the topic names of the top-level ``topic_data``/``topics`` arrays (each entry's
``name``, or ``topic`` where it has no ``name``; strings only, first occurrence
order), as a :class:`RenderedBody`. A response's decoder also lists every non-zero
``error_code`` at any depth, placed by the identifying fields of its structs
(:mod:`kafkapy.protocol.error_sites`): a struct function that holds an error code, or
calls one that does, takes two more arguments, the list and the (key, value) pairs of
its ancestors' identifying fields; the flat-array fast paths test the codes they unpack
(one ``any`` over a slice) and build entries only for a non-zero one, so an error-free
body pays a few comparisons and one tuple per array of such structs.
"""

from __future__ import annotations

import binascii
import json
import math
import struct
import uuid
from collections.abc import Callable
from json.encoder import encode_basestring  # the string escaper of json.dumps(ensure_ascii=False)
from typing import Any, NamedTuple

from kafkapy.protocol.error_sites import error_entry, site_key
from kafkapy.protocol.primitives import (
    ARRAY_STRUCTS,
    RUNTIME,
    Array,
    Binary,
    Fixed,
    Gen,
    Primitive,
    RecordsField,
    Text,
    emit_length_or_null,
)
from kafkapy.protocol.records_json import records_json_at
from kafkapy.protocol.schema import (
    UNKNOWN_TAGS,
    NullableStruct,
    StructCodec,
    emit_tag_section,
    fixed_run_sizes,
)

__all__ = ["JsonDecoder", "RenderedBody", "compile_json_decoder"]

# The top-level arrays whose entries name topics, in the order their names are listed.
TOPIC_ARRAYS = ("topic_data", "topics")


class RenderedBody(NamedTuple):
    """A body as JSON text, with the two values capture rows take from it."""

    text: str
    error_code: int | None  # the top-level error_code, when it is an int
    topics: list[str]  # names in the top-level topic_data/topics entries, first occurrence order
    # a response's non-zero error codes, each placed (error_sites); None for a request
    errors: list[dict[str, Any]] | None


JsonDecoder = Callable[[bytes, int, int], tuple[RenderedBody, int]]


# --- runtime helpers ---------------------------------------------------------------------------


def _b64(data: bytes | memoryview) -> str:
    return '"' + binascii.b2a_base64(data, newline=False).decode("ascii") + '"'


def _float(value: float) -> str:
    """A float as json.dumps writes it (allow_nan: NaN, Infinity, -Infinity)."""
    if math.isfinite(value):
        return float.__repr__(value)
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _uuid(raw: bytes) -> str:
    """16 wire bytes as the quoted ``str(UUID)``."""
    h = raw.hex()
    return f'"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"'


# "[%d,%d,...]" by length: a short int array (a partition's replicas) is one % on its unpacked tuple.
_INT_LISTS_KEPT = 65
_INT_LISTS = tuple("[" + ",".join(["%d"] * n) + "]" for n in range(_INT_LISTS_KEPT))

# Whole flat arrays (see _Emitter._emit_flat_array): (element format, element template, count) to
# the array's Struct and %-template. Counts are few per array (ApiVersions lists one per broker
# release); the bounds keep hostile counts from filling it.
_FLAT_MIN = 4
_FLAT_MAX = 1024
_FLAT_KEPT = 512
_flat_layouts: dict[tuple[str, str, int], tuple[struct.Struct, str]] = {}


def _flat_layout(fmt: str, item: str, n: int) -> tuple[struct.Struct, str]:
    key = (fmt, item, n)
    found = _flat_layouts.get(key)
    if found is None:
        if len(_flat_layouts) >= _FLAT_KEPT:
            _flat_layouts.clear()
        found = _flat_layouts[key] = (struct.Struct(">" + fmt * n), ",".join([item] * n))
    return found


def _unknown_tags(unknown: dict[int, bytes]) -> str:
    return "{" + ",".join(f'"{tag}":{_b64(data)}' for tag, data in unknown.items()) + "}"


def _topic_names(names: list[Any]) -> list[str]:
    """``names`` (a fresh list per body) deduplicated, strings only; one name, the common case,
    skips the dict and the comprehension."""
    if len(names) == 1:
        return names if type(names[0]) is str else []
    return [n for n in dict.fromkeys(names) if type(n) is str]


def _flat_errors(errs: list[dict[str, Any]], where: tuple[tuple[str, Any], ...], values: tuple[Any, ...],
                 width: int, code_at: int, sites: tuple[tuple[str, int], ...]) -> None:
    """The entries of a flat array's elements (unpacked as one tuple, ``width`` values each) whose
    code is not zero: called only when one is not."""
    for start in range(0, len(values), width):
        code = values[start + code_at]
        if code:
            errs.append(error_entry(code, where + tuple((key, values[start + i]) for key, i in sites)))


def _plain(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return binascii.b2a_base64(value, newline=False).decode("ascii")
    raise TypeError(f"no JSON form for {type(value).__name__}")


def _default_json(value: Any) -> str:
    """A tagged field's default as JSON, worked out once when the decoder is generated."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_plain)


def _runtime() -> dict[str, Any]:
    names = dict(RUNTIME)
    names.update({
        "_Struct": struct.Struct,
        "_ARRAY_STRUCTS": ARRAY_STRUCTS,
        "_quote": encode_basestring,
        "_b64": _b64,
        "_float": _float,
        "_uuid": _uuid,
        "_BOOL": ("false", "true"),
        "_records_at": records_json_at,
        "_flat_layout": _flat_layout,
        "_FLAT_MIN": _FLAT_MIN,
        "_INT_LISTS": _INT_LISTS,
        "_INT_LISTS_KEPT": _INT_LISTS_KEPT,
        "_FLAT_MAX": _FLAT_MAX,
        "_unknown_tags": _unknown_tags,
        "_topic_names": _topic_names,
        "_RenderedBody": RenderedBody,
        "_new": tuple.__new__,
        "_error_entry": error_entry,
        "_flat_errors": _flat_errors,
    })  # fmt: skip
    return names


# --- code generation ---------------------------------------------------------------------------


def _literal(text: str) -> str:
    """Text for the literal part of a generated f-string."""
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("{", "{{").replace("}", "}}")


def _key(name: str) -> str:
    return _literal(encode_basestring(name) + ":")


def _fixed_json(codec: Fixed, var: str) -> str:
    """An expression for the JSON of a value as struct.unpack_from gives it."""
    if codec.name == "bool":
        return f"_BOOL[{var}]"
    if codec.name == "float64":
        return f"_float({var})"
    if codec.name == "uuid":
        return f"_uuid({var})"
    return var  # an int: the f-string writes it as str() does


class _Emitter:
    """Emits the JSON decoders of one message: each struct function is generated into its own
    line list (the primitives' emitters write to ``g.lines``), then appended to the module."""

    def __init__(self, g: Gen, decode_records: bool, errors: bool = False) -> None:
        self.g = g
        self.decode_records = decode_records
        self.errors = errors  # list error codes (a response's decoder)
        self._bearing: dict[int, bool] = {}
        self.here = "where"  # the expression of the struct being emitted: its ancestors' and own sites
        self.prelude: list[str] = []  # module constants (precompiled Structs)
        self.module: list[str] = []  # finished functions, nested ones before their users
        self.functions: dict[int, str] = {}

    def source(self) -> str:
        return "\n".join(self.prelude + self.module) + "\n"

    def bears_errors(self, codec: Primitive) -> bool:
        """Whether a struct (or an array of them) holds an error code at any depth, when listing."""
        if not self.errors:
            return False
        if isinstance(codec, NullableStruct):
            codec = codec.inner
        if isinstance(codec, Array):
            return self.bears_errors(codec.element)
        if not isinstance(codec, StructCodec):
            return False
        found = self._bearing.get(id(codec))
        if found is None:
            self._bearing[id(codec)] = False  # no struct contains itself; guards the recursion
            found = self._bearing[id(codec)] = "error_code" in codec.keys or any(
                self.bears_errors(s.codec) for s in codec.slots + codec.tagged)
        return found

    def call_args(self, codec: Primitive, end: str, here: str | None = None) -> str:
        """The arguments of a struct function's call: the error list and sites when it bears errors."""
        if self.bears_errors(codec):
            return f"buf, pos, {end}, errs, {here or self.here}"
        return f"buf, pos, {end}"

    def function(self, codec: StructCodec, *, name_key: str | None = None, root: bool = False,
                 array: str | None = None) -> str:
        """Emit a struct's function once and return its name. With ``name_key`` it also returns that
        field's value (a topic entry's name) as a third item; ``root`` returns a RenderedBody.
        ``array``: the key of the array whose element it is (where an error sits depends on it)."""
        found = self.functions.get(id(codec))
        if found is not None:
            return found
        g = self.g
        name = g.var("json_" + codec.name)
        self.functions[id(codec)] = name
        saved, g.lines = g.lines, []
        saved_here = self.here
        bearing = not root and self.bears_errors(codec)
        g.emit(0, f"def {name}(buf, pos, end{', errs, where' if bearing else ''}):")
        self._struct_body(codec, name_key, root, array)
        g.emit(0, "")
        self.module.extend(g.lines)
        g.lines = saved
        self.here = saved_here
        return name

    def _struct_body(self, codec: StructCodec, name_key: str | None, root: bool, array: str | None) -> None:
        g = self.g
        keep: dict[str, str] = {}  # field key -> local that keeps its value (not only its text)
        if name_key is not None:
            keep[name_key] = "name"
        bearing = self.bears_errors(codec)
        if (root or bearing) and "error_code" in codec.keys:
            keep["error_code"] = "error_code"
        # the fields that say where this struct's errors (and its children's) sit, as they are read
        sites: dict[str, tuple[str, str]] = {}
        if bearing:
            for slot in codec.slots:
                key = site_key(slot.key, array)
                if key is not None:
                    local = keep.setdefault(slot.key, "site_" + slot.key)
                    sites[slot.key] = (key, local)
            self.here = "where" if not root else "()"
        read: list[tuple[str, str]] = []  # sites read so far: the here of the calls that follow

        def site_read(field: str) -> None:
            if field in sites:
                read.append(sites[field])
                pairs = "".join(f"({key!r}, {local}), " for key, local in read)
                self.here = f"{'where' if not root else '()'} + ({pairs})"

        marked = bearing and "error_code" in keep and any(self.bears_errors(s.codec) for s in codec.slots)
        if marked:
            g.emit(1, "mark = len(errs)")  # children's entries are listed before the code: it goes first
        topic_lists: list[str] = []
        parts: list[str] = []  # f-string pieces (key literal and value expression), in Body order
        for run in codec._runs():
            first = run[0]
            if isinstance(first.codec, Fixed) and not first.field.present_if_remaining:
                fmt = ">" + "".join(s.codec.fmt or "" for s in run)
                size = struct.calcsize(fmt)
                st = g.var("S")
                self.prelude.append(f"{st} = _Struct({fmt!r})")
                names = [g.var("x") for _ in run]
                g.emit(1, f"if pos + {size} > end: raise _short_run(pos, end, {fixed_run_sizes(run)!r})")
                g.emit(1, f"{', '.join(names)}{',' if len(run) == 1 else ''} = {st}.unpack_from(buf, pos)")
                g.emit(1, f"pos += {size}")
                for s, var in zip(run, names):
                    assert isinstance(s.codec, Fixed)
                    if s.key in keep:
                        g.emit(1, f"{keep[s.key]} = {var}")
                    parts.append(_key(s.key) + "{" + _fixed_json(s.codec, var) + "}")
                    site_read(s.key)
                continue
            target = g.var("j")
            topics = topic_lists if root and first.key in TOPIC_ARRAYS else None
            if first.field.present_if_remaining:
                g.emit(1, "if pos >= end:")
                g.emit(2, f"{target} = 'null'")
                if first.key in keep:
                    g.emit(2, f"{keep[first.key]} = None")
                g.emit(1, "else:")
                self._emit_json(first.codec, target, 2, first.path, "end", keep.get(first.key), topics)
            else:
                self._emit_json(first.codec, target, 1, first.path, "end", keep.get(first.key), topics)
            parts.append(_key(first.key) + "{" + target + "}")
            site_read(first.key)
        tail = ""
        if codec.flexible:
            targets = {}
            for slot in codec.tagged:
                targets[slot.key] = target = g.var("j")
                g.emit(1, f"{target} = {_default_json(slot.default)!r}")
                if slot.key in keep:
                    plain = isinstance(slot.default, (str, int)) and not isinstance(slot.default, bool)
                    g.emit(1, f"{keep[slot.key]} = {repr(slot.default) if plain else None}")
                parts.append(_key(slot.key) + "{" + target + "}")
            self._emit_tags(codec, targets, keep)
            tail = "{tail}"
        text = "f'{{" + ",".join(parts) + tail + "}}'"
        if bearing and "error_code" in keep:
            entry = f"_error_entry(error_code, {self.here})"
            add = f"errs.insert(mark, {entry})" if marked else f"errs.append({entry})"
            g.emit(1, f"if error_code: {add}")
        if root:
            if bearing:
                g.lines.insert(1, "    errs = []")
            if topic_lists:
                g.lines.insert(1, "    " + "; ".join(f"{t} = []" for t in topic_lists))
            code = "error_code if type(error_code) is int else None" if "error_code" in keep else "None"
            listed = f"_topic_names({' + '.join(topic_lists)})" if topic_lists else "[]"
            errs = "errs" if bearing else "[]" if self.errors else "None"
            g.emit(1, f"return _new(_RenderedBody, ({text}, {code}, {listed}, {errs})), pos")
        elif name_key is not None:
            g.emit(1, f"return {text}, pos, name")
        else:
            g.emit(1, f"return {text}, pos")

    def _emit_tags(self, codec: StructCodec, targets: dict[str, str], keep: dict[str, str]) -> None:
        g = self.g
        g.emit(1, "tail = ''")  # the unknown tags' entry, if any
        emit_tag_section(
            g, codec,
            lambda slot: self._emit_json(
                slot.codec, targets[slot.key], 4, slot.path, "stop", keep.get(slot.key), None
            ),
            "unknown = {}",
        )  # fmt: skip
        unknown_key = ("," if codec.slots or codec.tagged else "") + encode_basestring(UNKNOWN_TAGS) + ":"
        g.emit(2, f"if unknown is not None: tail = {unknown_key!r} + _unknown_tags(unknown)")

    def _emit_json(self, codec: Primitive, target: str, ind: int, field: str, end: str,
                   keep: str | None, topics: list[str] | None) -> None:
        """Read one value of ``codec`` and set ``target`` to its JSON text. ``keep``: a local that
        gets the value itself (None unless a string or number); ``topics``: where an array of topic
        entries registers the list its entries' names go to."""
        g = self.g
        if isinstance(codec, StructCodec):
            g.emit(ind, f"{target}, pos = {self.function(codec)}({self.call_args(codec, end)})")
        elif isinstance(codec, NullableStruct):
            fn = self.function(codec.inner)
            g.emit(ind, f"if pos + 1 > {end}: raise _short(pos, 1, {end}, {field!r})")
            g.emit(ind, f"if buf[pos] >= 128: pos += 1; {target} = 'null'")
            g.emit(ind, "else:")
            g.emit(ind + 1, "pos += 1")
            g.emit(ind + 1, f"{target}, pos = {fn}({self.call_args(codec.inner, end)})")
        elif isinstance(codec, Array):
            self._emit_array(codec, target, ind, field, end, topics)
        elif isinstance(codec, RecordsField):
            # RecordsField.emit_read's checks, but the JSON is written from the bytes where they lie:
            # no Records object, no view (records fields are the bulk of a capture's bodies).
            n = g.var("n")
            emit_length_or_null(g, n, ind, field, codec, end, target, "'null'", codec.kind)
            g.emit(ind, "else:")
            g.emit(ind + 1, f"if pos + {n} > {end}: raise _short(pos, {n}, {end}, {field!r})")
            stop = f"pos + {n}"
            convert = f"_records_at(buf, pos, {stop})" if self.decode_records else f"_b64(buf[pos:{stop}])"
            g.emit(ind + 1, f"{target} = {convert}; pos += {n}")
            if keep:
                g.emit(ind, f"{keep} = None")
        else:
            value = keep or g.var("v")
            codec.emit_read(g, value, ind, field, end)
            if isinstance(codec, Fixed):
                if codec.name == "uuid":  # emit_read made a UUID
                    g.emit(ind, f"{target} = '\"' + str({value}) + '\"'")
                else:
                    expr = _fixed_json(codec, value)
                    g.emit(ind, f"{target} = {f'str({value})' if expr == value else expr}")
                return
            if isinstance(codec, (Text, Binary)):
                convert = f"_quote({value})" if isinstance(codec, Text) else f"_b64({value})"
                if codec.nullable:
                    convert = f"'null' if {value} is None else {convert}"
                g.emit(ind, f"{target} = {convert}")
                if isinstance(codec, Text):
                    return
            else:
                raise TypeError(f"no JSON form for {codec!r}")
        if keep:
            g.emit(ind, f"{keep} = None")

    def _emit_array(self, codec: Array, target: str, ind: int, field: str, end: str,
                    topics: list[str] | None) -> None:
        g = self.g
        n, items, i, item = g.var("n"), g.var("a"), g.var("i"), g.var("e")
        emit_length_or_null(g, n, ind, field, codec, end, target, "'null'", "array")
        el = codec.element
        ints = isinstance(el, Fixed) and el.name not in ("uuid", "bool")
        if not ints:  # an empty array (Fetch's forgotten topics, say) needs no list, loop or join
            g.emit(ind, f"elif {n} == 0: {target} = '[]'")
        g.emit(ind, "else:")
        if ints:
            assert isinstance(el, Fixed)
            # One unpack_from for the run; the common short arrays (none, or one broker id) skip the
            # join, which costs more than the rest of the array.
            size, one = g.var("z"), g.var("S")
            self.prelude.append(f"{one} = _Struct('>{el.fmt}')")
            unpack = f"_ARRAY_STRUCTS[{el.fmt!r}][{n}].unpack_from(buf, pos)"
            g.emit(ind + 1, f"{size} = {n} * {el.size}")
            g.emit(ind + 1, f"if pos + {size} > {end}: raise _short(pos, {size}, {end}, {field!r})")
            g.emit(ind + 1, f"if {n} == 0: {target} = '[]'")
            if el.name == "float64":
                first = f"_float({one}.unpack_from(buf, pos)[0])"
                g.emit(ind + 1, f"elif {n} == 1: {target} = '[' + {first} + ']'")
                g.emit(ind + 1, f"else: {target} = '[' + ','.join(map(_float, {unpack})) + ']'")
            else:  # a list of ints prints as JSON does, but for the spaces after its commas
                g.emit(ind + 1, f"elif {n} == 1: {target} = f'[{{{one}.unpack_from(buf, pos)[0]}}]'")
                g.emit(ind + 1, f"elif {n} < _INT_LISTS_KEPT: {target} = _INT_LISTS[{n}] % {unpack}")
                g.emit(ind + 1, f"else: {target} = str(list({unpack})).replace(' ', '')")
            g.emit(ind + 1, f"pos += {size}")
            return
        g.emit(ind + 1, f"if {n} > {end} - pos: raise _too_many(pos, {n}, {end}, {field!r})")
        array = field.rsplit(".", 1)[-1].rstrip("[]")
        here = self.here
        if self.bears_errors(el) and here not in ("where", "()"):
            here = g.var("h")  # the sites of every element's calls, one tuple for the array
            g.emit(ind + 1, f"{here} = {self.here}")
        name_key = None
        if isinstance(el, StructCodec) and topics is not None:
            name_key = "name" if "name" in el.keys else "topic" if "topic" in el.keys else None
        if name_key is not None:
            assert isinstance(el, StructCodec) and topics is not None
            names = g.var("names")
            topics.append(names)
            fn = self.function(el, name_key=name_key, array=array)
            args = self.call_args(el, end, here)
            # one entry (a client's one topic, say) needs no list, loop or join
            g.emit(ind + 1, f"if {n} == 1:")
            g.emit(ind + 2, f"{item}, pos, name = {fn}({args}); {names}.append(name)")
            g.emit(ind + 2, f"{target} = f'[{{{item}}}]'")
            g.emit(ind + 1, "else:")
            ind += 1
            g.emit(ind + 1, f"{items} = []")
            g.emit(ind + 1, f"for {i} in range({n}):")
            g.emit(ind + 2, f"{item}, pos, name = {fn}({args})")
            g.emit(ind + 2, f"{items}.append({item}); {names}.append(name)")
        elif isinstance(el, StructCodec):
            fn = self.function(el, array=array)
            args = self.call_args(el, end, here)
            g.emit(ind + 1, f"if {n} == 1:")  # as above
            g.emit(ind + 2, f"{item}, pos = {fn}({args})")
            g.emit(ind + 2, f"{target} = f'[{{{item}}}]'")
            self._emit_flat_array(el, n, target, ind + 1, end, keyword="elif", here=here, array=array)
            g.emit(ind + 1, "else:")
            ind += 1
            g.emit(ind + 1, f"{items} = []")
            g.emit(ind + 1, f"for {i} in range({n}):")
            if self._emit_flat_element(el, items, ind + 2, end, here=here, array=array):
                g.emit(ind + 2, "else:")
                g.emit(ind + 3, f"{item}, pos = {fn}({args})")
                g.emit(ind + 3, f"{items}.append({item})")
            else:
                g.emit(ind + 2, f"{item}, pos = {fn}({args})")
                g.emit(ind + 2, f"{items}.append({item})")
        else:
            g.emit(ind + 1, f"{items} = []")
            g.emit(ind + 1, f"for {i} in range({n}):")
            self._emit_json(el, item, ind + 2, field + "[]", end, None, None)
            g.emit(ind + 2, f"{items}.append({item})")
        # an f-string builds the text in one allocation; '[' + ... + ']' copies it twice
        g.emit(ind + 1, f"{target} = f'[{{\",\".join({items})}}]'")


    def _emit_flat_array(self, codec: StructCodec, n: str, target: str, ind: int, end: str,
                         keyword: str = "if", here: str = "where", array: str | None = None) -> bool:
        """For an array of structs of int fields only (ApiVersions' 60-odd entries, Fetch's
        partitions), emit an ``if`` for the common array: every element's bytes there and, when
        flexible, every tag section empty. Then one unpack_from reads the whole array and one
        ``%`` writes it, against a loop of an unpack and an f-string per element. False when the
        struct does not qualify (the caller then emits no ``if``). ``keyword``: ``elif`` to go on
        from a test the caller emitted."""
        if not codec.slots or any(not isinstance(s.codec, Fixed) or s.field.present_if_remaining
                                  or s.codec.name in ("bool", "float64", "uuid") for s in codec.slots):
            return False
        g = self.g
        fmt = "".join(s.codec.fmt or "" for s in codec.slots)
        size = struct.calcsize(">" + fmt)
        width = size + codec.flexible  # an empty tag section is one zero byte, skipped as a pad byte
        fields = [encode_basestring(s.key) + ":%d" for s in codec.slots]
        # with an empty tag section every tagged field holds its default
        fields += [(encode_basestring(s.key) + ":" + _default_json(s.default)).replace("%", "%%")
                   for s in codec.tagged]
        item = "{" + ",".join(fields) + "}"
        # below _FLAT_MIN elements (Fetch's usual one partition) the loop's inline path is cheaper
        check = f"_FLAT_MIN <= {n} <= _FLAT_MAX and pos + {n} * {width} <= {end}"
        if codec.flexible:
            check += f" and buf[pos + {size}:pos + {n} * {width}:{width}] == bytes({n})"
        g.emit(ind, f"{keyword} {check}:")
        layout = g.var("L")
        g.emit(ind + 1, f"{layout} = _flat_layout({fmt + 'x' * codec.flexible!r}, {item!r}, {n})")
        if self.bears_errors(codec):
            values = g.var("t")
            width_values = len(codec.slots)
            at = [s.key for s in codec.slots].index("error_code")
            sites = tuple((key, i) for i, s in enumerate(codec.slots)
                          if (key := site_key(s.key, array)) is not None)
            g.emit(ind + 1, f"{values} = {layout}[0].unpack_from(buf, pos)")
            g.emit(ind + 1, f"{target} = f'[{{{layout}[1] % {values}}}]'")
            g.emit(ind + 1, f"if any({values}[{at}::{width_values}]): "
                            f"_flat_errors(errs, {here}, {values}, {width_values}, {at}, {sites!r})")
        else:
            g.emit(ind + 1, f"{target} = f'[{{{layout}[1] % {layout}[0].unpack_from(buf, pos)}}]'")
        g.emit(ind + 1, f"pos += {n} * {width}")
        return True

    def _emit_flat_element(self, codec: StructCodec, items: str, ind: int, end: str, here: str = "where",
                           array: str | None = None) -> bool:
        """For a struct of fixed-width fields only (ApiVersions' entries, Fetch's partitions), emit
        an inline ``if`` for the common element: all its bytes there and, when flexible, an empty
        tag section. Its text is then what the struct's function returns, so only other elements
        (and every error) need the call, emitted by the caller as the ``else``. False when the
        struct does not qualify."""
        if not codec.slots or any(not isinstance(s.codec, Fixed) or s.field.present_if_remaining
                                  for s in codec.slots):
            return False
        g = self.g
        fmt = ">" + "".join(s.codec.fmt or "" for s in codec.slots)
        size = struct.calcsize(fmt)
        st = g.var("S")
        self.prelude.append(f"{st} = _Struct({fmt!r})")
        names = [g.var("x") for _ in codec.slots]
        parts = [_key(s.key) + "{" + _fixed_json(s.codec, v) + "}"  # type: ignore[arg-type]
                 for s, v in zip(codec.slots, names)]
        # with an empty tag section every tagged field holds its default
        parts += [_key(s.key) + _literal(_default_json(s.default)) for s in codec.tagged]
        if codec.flexible:
            g.emit(ind, f"if pos + {size} < {end} and buf[pos + {size}] == 0:")
        else:
            g.emit(ind, f"if pos + {size} <= {end}:")
        g.emit(ind + 1, f"{', '.join(names)}{',' if len(names) == 1 else ''} = {st}.unpack_from(buf, pos)")
        g.emit(ind + 1, f"pos += {size + codec.flexible}")
        g.emit(ind + 1, f"{items}.append(f'{{{{{','.join(parts)}}}}}')")
        if self.bears_errors(codec):
            code = names[[s.key for s in codec.slots].index("error_code")]
            pairs = "".join(f"({key!r}, {var}), " for s, var in zip(codec.slots, names)
                            if (key := site_key(s.key, array)) is not None)
            g.emit(ind + 1, f"if {code}: errs.append(_error_entry({code}, {here} + ({pairs})))")
        return True


def json_decoder_source(root: StructCodec, decode_records: bool, errors: bool = False) -> tuple[str, str]:
    """The generated source of one message's JSON decoder, and its top-level function's name.
    ``errors``: list the body's non-zero error codes (a response's), else RenderedBody.errors is None."""
    emitter = _Emitter(Gen(), decode_records, errors)
    name = emitter.function(root, root=True)
    return emitter.source(), name


def compile_json_decoder(root: StructCodec, decode_records: bool, errors: bool = False) -> JsonDecoder:
    """Generate, compile and load one message's JSON decoder: ``(buf, pos, end)`` to
    ``(RenderedBody, pos)``, raising what the Body decoder of ``root`` raises. ``errors``: list
    the non-zero error codes (:mod:`kafkapy.protocol.error_sites`)."""
    source, name = json_decoder_source(root, decode_records, errors)
    namespace = _runtime()
    exec(compile(source, f"<kafkapy json decoder {root.name} v{root.version}>", "exec"), namespace)
    decoder: JsonDecoder = namespace[name]
    return decoder
