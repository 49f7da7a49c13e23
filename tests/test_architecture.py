"""kafkapy's import graph, read from its source with ``ast``, keeps the layer order and has no cycle.

The layers, lowest first (a unit is a top-level package, or a top-level module of kafkapy/)::

    kafkapy (the package's __init__)  errors  validators
    protocol
    store  log  client
    server
    configs  features  quotas  topics  coordination  observers  dataplane  groups  transactions
    faults  inspection  strict  acls  shares  sharestate  telemetry                     (the modules)
    assembly  embedded  seeding  testing  control  capture  spark
    commands  cli  __main__

A unit may import its own layer or any below it, never one above. Placement, and why:

* ``kafkapy/__init__.py`` sits at the bottom because Python runs it before any ``kafkapy.x``
  is imported, so everything stands on it. It reaches up once, lazily: the PEP 562
  ``__getattr__`` that makes ``kafkapy.Broker`` importable without importing asyncio (and the
  TYPE_CHECKING import that types that attribute). Those are exempt from the order; anything
  else is listed in KNOWN_EXCEPTIONS with its reason.
* ``validators.py`` (Kafka's config validators as values) imports nothing of kafkapy's: the
  topic configs (log/) and the broker's keys (server/) both state their bounds with it.
* ``client.py`` (a blocking socket client for the CLI) stands on protocol alone: store level.
* ``assembly.py`` is the composition root: it names the default modules, so it sits above them;
  ``embedded.py`` and ``testing.py`` (the pytest fixtures) build brokers through it.
* ``control/`` (the HTTP control endpoint) drives the embedded Broker, which starts it, so it
  sits beside ``embedded`` and names the Broker by a Protocol rather than importing it.

Which imports count. Every ``import`` and ``from ... import`` anywhere in a file: at module
level, inside functions (lazy imports run too, only later), and inside ``if TYPE_CHECKING:``.
All of them must follow the layer order, since a type-only import still couples the importer
to what it names (a module annotating with BrokerRuntime depends on the runtime's shape). For
cycles, two graphs: between units every edge counts (a type-only cycle between packages is
still two packages that cannot be understood apart); between single files only the imports
that run (module level and lazy), because mutual annotations of two collaborating classes of
one package (the dispatcher and the connection) are how Python spells mutually recursive types
and never execute.

The checker runs on a copy with a violation planted, so the test is known to be able to fail.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent / "kafkapy"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"kafkapy", "errors", "validators"}),
    frozenset({"protocol"}),
    frozenset({"store", "log", "client"}),
    frozenset({"server"}),
    frozenset({"configs", "features", "quotas", "topics", "coordination", "observers", "dataplane",
               "groups", "transactions", "faults", "inspection", "strict", "acls", "shares", "sharestate",
               "telemetry"}),
    frozenset({"assembly", "embedded", "seeding", "testing", "control", "capture", "spark"}),
    frozenset({"commands", "cli", "__main__"}),
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
MODULE_PACKAGES = LAYERS[4]

# Imports that break the order today, each with its reason; the test fails when one is gone,
# so the list only shrinks.
KNOWN_EXCEPTIONS = {
    # DecodeError's message names the API ("ApiVersions (key 18)") from the catalogue, lazily.
    # The fix is for protocol/ to hand errors the name (owned elsewhere; see docs/architecture.md).
    ("kafkapy.errors", "kafkapy.protocol.catalogue"),
    # The capture observer writes pcap files with capture's writer, which depends on nothing
    # above protocol; it belongs in a lower layer once capture/ (owned elsewhere) is split.
    ("kafkapy.observers.capture", "kafkapy.capture.writer"),
}


@attrs.frozen
class Import:
    source: str  # dotted module name of the importing file
    target: str  # dotted module name imported (a module file or package that exists)
    kind: str  # "runtime" (module level), "lazy" (in a function) or "typing" (if TYPE_CHECKING)
    line: int
    lazy_attribute: bool = False  # inside a package __init__'s module-level __getattr__ (PEP 562)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, kind: str, lazy_attribute: bool) -> Iterator[tuple[ast.AST, str, bool]]:
    for child in ast.iter_child_nodes(node):
        child_kind, child_lazy = kind, lazy_attribute
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            child_kind = "lazy" if kind == "runtime" else kind
            child_lazy = lazy_attribute or (isinstance(node, ast.Module) and
                                            getattr(child, "name", "") == "__getattr__")
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.body:
                yield statement, "typing", child_lazy
                yield from _walk(statement, "typing", child_lazy)
            for statement in child.orelse:
                yield statement, child_kind, child_lazy
                yield from _walk(statement, child_kind, child_lazy)
            continue
        yield child, child_kind, child_lazy
        yield from _walk(child, child_kind, child_lazy)


def imports(root: Path) -> list[Import]:
    """Every import of a kafkapy module by a file under ``root`` (a kafkapy/ directory)."""
    known = {module_name(root, path) for path in root.rglob("*.py")}
    found = []
    for path in sorted(root.rglob("*.py")):
        source = module_name(root, path)
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, kind, lazy in _walk(tree, "runtime", False):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from pkg import module` imports the module; `from module import name` the module.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names]
            for target in targets:
                while target and target not in known:  # `import a.b.c` of a non-module: its module
                    target = target.rpartition(".")[0]
                if target and target != source:
                    found.append(Import(source, target, kind, node.lineno, lazy))  # type: ignore[attr-defined]
    return found


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def _exempt(edge: Import, lazy_attributes: set[str]) -> bool:
    """The package's lazy attribute (PEP 562), or a known exception."""
    if edge.source == "kafkapy" and edge.target in lazy_attributes:
        return True
    return (edge.source, edge.target) in KNOWN_EXCEPTIONS


def violations(root: Path) -> list[str]:
    """Every breach of the rules above in the tree at ``root``, one line each."""
    everything = imports(root)
    lazy_attributes = {e.target for e in everything if e.source == "kafkapy" and e.lazy_attribute}
    found = [e for e in everything if not _exempt(e, lazy_attributes)]
    seen_exceptions = {(e.source, e.target) for e in everything} & KNOWN_EXCEPTIONS
    problems = []
    units = {unit(module_name(root, path)) for path in root.rglob("*.py")}
    problems += [f"{name} is in no layer (place it in tests/test_architecture.py)"
                 for name in sorted(units - RANK.keys())]
    for edge in found:
        low, high = unit(edge.source), unit(edge.target)
        if low not in RANK or high not in RANK or RANK[high] <= RANK[low]:
            continue
        problems.append(f"{edge.source}:{edge.line} imports {edge.target} ({edge.kind}), a higher layer")
    if root == ROOT:
        problems += [f"known exception {a} -> {b} no longer occurs: remove it from KNOWN_EXCEPTIONS"
                     for a, b in sorted(KNOWN_EXCEPTIONS - seen_exceptions)]
    unit_edges = {(unit(e.source), unit(e.target)) for e in found if unit(e.source) != unit(e.target)}
    problems += [f"packages import each other: {' <-> '.join(c)}" for c in cycles(unit_edges)]
    file_edges = {(e.source, e.target) for e in found if e.kind != "typing"}
    problems += [f"modules import each other at run time: {' <-> '.join(c)}" for c in cycles(file_edges)]
    for edge in found:
        if unit(edge.source) in MODULE_PACKAGES and edge.target == "kafkapy.server.broker":
            problems.append(f"{edge.source}:{edge.line} imports kafkapy.server.broker: modules get "
                            "BrokerServices, never the runtime")
    return problems


def test_kafkapy_keeps_its_layers_and_has_no_import_cycle() -> None:
    assert violations(ROOT) == []


def test_the_graph_sees_imports_of_every_kind() -> None:
    """The walk finds module-level, function-level and TYPE_CHECKING imports, and resolves
    ``from package import module`` to the module."""
    found = {(e.source, e.target): e.kind for e in imports(ROOT)}
    assert found[("kafkapy.server.broker", "kafkapy.server.eager")] == "runtime"
    assert found[("kafkapy.server.broker", "kafkapy.server.dispatch")] == "lazy"
    assert found[("kafkapy.server.dispatch", "kafkapy.server.broker")] == "typing"
    assert ("kafkapy.server.core", "kafkapy") in found  # `import kafkapy`, for its __version__


@pytest.fixture
def copy_of_kafkapy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT, tmp_path / "kafkapy", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "kafkapy"


def _plant(root: Path, relative: str, line: str) -> None:
    path = root / relative
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_a_planted_upward_import_fails(copy_of_kafkapy: Path) -> None:
    assert violations(copy_of_kafkapy) == []
    _plant(copy_of_kafkapy, "protocol/versions.py", "from kafkapy.server import config  # planted")
    problems = violations(copy_of_kafkapy)
    assert any(p.startswith("kafkapy.protocol.versions:") and "kafkapy.server.config" in p for p in problems)


def test_a_planted_upward_import_inside_a_function_or_type_check_fails(copy_of_kafkapy: Path) -> None:
    _plant(copy_of_kafkapy, "store/base.py", "def _late() -> None:\n    import kafkapy.topics.module")
    _plant(copy_of_kafkapy, "errors.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                         "    from kafkapy.protocol import codec")
    problems = violations(copy_of_kafkapy)
    assert any("kafkapy.store.base" in p and "kafkapy.topics.module (lazy)" in p for p in problems)
    assert any("kafkapy.errors" in p and "kafkapy.protocol.codec (typing)" in p for p in problems)


def test_a_planted_cycle_fails(copy_of_kafkapy: Path) -> None:
    """Two modules of one layer importing each other (sideways, so no layer rule catches it)."""
    _plant(copy_of_kafkapy, "topics/module.py", "import kafkapy.features.rules")
    _plant(copy_of_kafkapy, "features/rules.py", "import kafkapy.topics.assignment")
    problems = violations(copy_of_kafkapy)
    assert "packages import each other: features <-> topics" in problems


def test_a_planted_file_cycle_inside_a_package_fails(copy_of_kafkapy: Path) -> None:
    _plant(copy_of_kafkapy, "server/eager.py", "from kafkapy.server import dispatch")
    problems = violations(copy_of_kafkapy)
    assert any(p.startswith("modules import each other at run time:") and "kafkapy.server.eager" in p
               for p in problems)


def test_a_module_importing_the_runtime_fails(copy_of_kafkapy: Path) -> None:
    _plant(copy_of_kafkapy, "topics/assignment.py",
           "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kafkapy.server.broker import X")
    assert any("kafkapy.topics.assignment" in p and "modules get BrokerServices" in p
               for p in violations(copy_of_kafkapy))


def test_a_file_in_no_layer_fails(copy_of_kafkapy: Path) -> None:
    (copy_of_kafkapy / "newthing.py").write_text("x = 1\n", encoding="utf-8")
    assert "newthing is in no layer (place it in tests/test_architecture.py)" in violations(copy_of_kafkapy)


# --- error codes and API keys by name ---------------------------------------------------------------

# Where codes and keys are written by name: the broker and its modules, and what builds on them.
# Not yet protocol/, capture/, commands/ and cli.py, which other branches are changing: the scan
# finds 12 bare numbers there at this commit (codec.py's UNSUPPORTED_VERSION and an api_key
# comparison, the commands' own API key constants, two in cli.py). Add them here once fixed.
NAMED_CODE_UNITS = frozenset({"server", *MODULE_PACKAGES, "assembly", "embedded", "testing", "client",
                              "control"})
# Calls whose first argument is an API key.
API_KEY_CALLS = frozenset({"fit_body", "encode_response", "encode_response_body", "decode_request",
                           "decode_response", "encode_request", "get_api", "api_name", "request_decoder",
                           "response_encoder", "response_header", "request"})


def _int_literal(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _names_key(node: ast.AST, word: str) -> bool:
    """A name, attribute or string constant ending in ``word`` (``api_key``, ``error_code``)."""
    if isinstance(node, ast.Name):
        return node.id.endswith(word)
    if isinstance(node, ast.Attribute):
        return node.attr.endswith(word)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(word)


def bare_codes(path: Path) -> list[str]:
    """Error codes and API keys written as int literals in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is not None and _names_key(key, "error_code") and _int_literal(value):
                    found.append(f"{line}: error_code given as a number")
                if _int_literal(key) and isinstance(value, ast.Call) and \
                        getattr(value.func, "id", "") == "ApiHandler":
                    found.append(f"{line}: API key of an ApiHandler given as a number")
        elif isinstance(node, ast.Call):
            found += [f"{line}: error_code given as a number" for keyword in node.keywords
                      if keyword.arg is not None and keyword.arg.endswith("error_code")
                      and _int_literal(keyword.value)]
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            if name in API_KEY_CALLS and node.args and _int_literal(node.args[0]):
                found.append(f"{line}: API key of {name}() given as a number")
            if name in ("KafkaApiError", "error") and node.args and _int_literal(node.args[0]):
                found.append(f"{line}: error code of {name}() given as a number")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                subject = target.slice if isinstance(target, ast.Subscript) else target
                if _names_key(subject, "error_code") and _int_literal(node.value):
                    found.append(f"{line}: error_code given as a number")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for word in ("api_key", "error_code"):
                if any(_names_key(side, word) for side in sides) and any(_int_literal(s) for s in sides):
                    found.append(f"{line}: {word} compared with a number")
    members = {*_enum_members("ErrorCode"), *_enum_members("ApiKey")}
    for statement in tree.body:  # a module's own copy of an enum member
        if isinstance(statement, ast.Assign) and _int_literal(statement.value):
            found += [f"{statement.lineno}: {t.id} = a number; use the enum member" for t in
                      statement.targets if isinstance(t, ast.Name) and t.id in members]
    return sorted(found, key=lambda problem: int(problem.partition(":")[0]))


def _enum_members(name: str) -> set[str]:
    from kafkapy.errors import ErrorCode
    from kafkapy.protocol.api_keys import ApiKey

    return set((ErrorCode if name == "ErrorCode" else ApiKey).__members__)


def test_error_codes_and_api_keys_are_written_by_name() -> None:
    """In the broker, its modules and what stands on them: no ``"error_code": 42``, no
    ``INVALID_REQUEST = 42``, no ``{18: ApiHandler(...)}``, no ``fit_body(32, ...)``, no
    ``api_key == 18``. ErrorCode.NONE, not 0, says "no error" too."""
    problems = [f"{path.relative_to(ROOT.parent)}:{problem}" for path in sorted(ROOT.rglob("*.py"))
                if unit(module_name(ROOT, path)) in NAMED_CODE_UNITS for problem in bare_codes(path)]
    assert problems == []


def test_the_code_scan_finds_each_kind_of_bare_number(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'INVALID_REQUEST = 42\n'
        'a = {"error_code": 0, 18: ApiHandler(x)}\n'
        'b = dict(error_code=35)\n'
        'c["error_code"] = 3\n'
        'fit_body(32, "response", 0, {})\n'
        'if context.api_key == 18: pass\n'
        'raise KafkaApiError(42, "no")\n'
        'ok = {"error_code": ErrorCode.NONE, ApiKey.METADATA: ApiHandler(x)}\n', encoding="utf-8")
    assert [problem.partition(":")[0] for problem in bare_codes(sample)] == \
        ["1", "2", "2", "3", "4", "5", "6", "7"]
