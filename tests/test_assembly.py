"""The composition root: module order, needs and cycles, config merged first, the CLI's module names."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.assembly import DEFAULT_MODULES, dependency_order, load_module_class
from kafkapy.configs import ConfigsModule
from kafkapy.quotas import QuotasModule
from kafkapy.server.config import ConfigError, ConfigKey
from kafkapy.server.modules import Module
from kafkapy.server.services import BrokerServices


def _module(name: str, provides: tuple[str, ...] = (), needs: tuple[str, ...] = (),
            wants: tuple[str, ...] = ()) -> type[Module]:
    attributes = {"name": name, "provides": provides, "needs": needs, "wants": wants}
    return type(f"M_{name}", (Module,), attributes)


def test_providers_come_before_the_modules_that_need_or_want_them() -> None:
    a = _module("a", needs=("b-thing",))
    b = _module("b", provides=("b-thing",), wants=("c-thing",))
    c = _module("c", provides=("c-thing",))
    d = _module("d")
    assert dependency_order([a, d, b, c]) == [c, b, a, d]


def test_a_want_without_provider_is_fine_a_need_is_an_error() -> None:
    assert dependency_order([_module("a", wants=("nothing",))])[0].name == "a"
    with pytest.raises(ConfigError, match=r"^module a needs 'nothing', which no enabled module provides"):
        dependency_order([_module("a", needs=("nothing",))])


def test_modules_that_need_each_other_are_a_one_line_error() -> None:
    a = _module("a", provides=("x",), needs=("y",))
    b = _module("b", provides=("y",), wants=("x",))
    with pytest.raises(ConfigError) as raised:
        dependency_order([a, b])
    assert str(raised.value) == "modules need each other: a -> b -> a"


def test_two_providers_of_one_capability_are_an_error() -> None:
    with pytest.raises(ConfigError, match="modules a and b both provide 'x'"):
        dependency_order([_module("a", provides=("x",)), _module("b", provides=("x",))])


def test_the_defaults_start_the_configs_module_before_the_quotas_module() -> None:
    order = dependency_order([QuotasModule, *DEFAULT_MODULES])
    assert order.index(ConfigsModule) < order.index(QuotasModule)


class ReadsItsKeyWhenBuilt(Module):
    """Reads its own config key in __init__: the root merged it before building any module."""

    name = "reads-its-key"
    config_keys: ClassVar[tuple[ConfigKey, ...]] = (ConfigKey("test.module.setting", "int", 7, "a test key"),)
    seen: ClassVar[list[int]] = []
    loggers: ClassVar[list[str]] = []

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        ReadsItsKeyWhenBuilt.seen.append(services.config["test.module.setting"])
        ReadsItsKeyWhenBuilt.loggers.append(services.log.name)

    def apis(self) -> Mapping[int, Any]:
        return {}


def test_module_config_keys_are_merged_before_any_module_is_built() -> None:
    ReadsItsKeyWhenBuilt.seen.clear()
    with Broker({"test.module.setting": "42"}, modules=[ReadsItsKeyWhenBuilt]):
        pass
    assert ReadsItsKeyWhenBuilt.seen == [42]
    assert ReadsItsKeyWhenBuilt.loggers[-1] == "kafkapy.modules.reads-its-key"  # a logger of its own


def test_a_missing_need_stops_the_embedded_broker_with_the_config_error() -> None:
    with pytest.raises(ConfigError, match="needs 'nowhere'"):
        Broker(modules=[_module("needy", needs=("nowhere",))]).__enter__()


def test_an_unknown_module_name_lists_the_installed_ones() -> None:
    installed = sorted(entry.name for entry in entry_points(group="kafkapy.modules"))
    with pytest.raises(ConfigError) as raised:
        load_module_class("nosuchmodule")
    assert str(raised.value) == (f"invalid value 'nosuchmodule' for kafkapy.modules: no module of that name "
                                 f"is installed (installed: {', '.join(installed)})")


def test_serve_with_an_unknown_module_name_says_so_in_one_line_and_exits_2() -> None:
    """Issue 14 item 3: the typo used to say "Empty module name"."""
    done = subprocess.run([sys.executable, "-m", "kafkapy.cli", "serve", "--override",
                           "kafkapy.modules=nosuchmodule", "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[-1].startswith("kafkapy serve: error: invalid value 'nosuchmodule' for kafkapy.modules: "
                                "no module of that name is installed (installed: ")
    assert "coordination" in lines[-1] and "quotas" in lines[-1]
    assert "Traceback" not in done.stderr


@given(st.integers(min_value=1, max_value=8).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                                                        st.booleans()), max_size=20))))
def test_dependency_order_puts_providers_first_or_names_a_cycle(graph: tuple[int, list[tuple[int, int, bool]]]
                                                                ) -> None:
    """Random modules m0..mN, each providing "cN"; an edge (a, b, hard) makes m_a need (or want)
    c_b. Either every module comes after the providers of its needs and wants, or the graph has a
    cycle and the error names one."""
    count, edges = graph
    needs: dict[int, set[int]] = {i: set() for i in range(count)}
    wants: dict[int, set[int]] = {i: set() for i in range(count)}
    for a, b, hard in edges:
        if a != b:
            (needs if hard else wants)[a].add(b)
    classes = [_module(f"m{i}", provides=(f"c{i}",), needs=tuple(f"c{j}" for j in sorted(needs[i])),
                       wants=tuple(f"c{j}" for j in sorted(wants[i]))) for i in range(count)]
    try:
        order = dependency_order(classes)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("modules need each other: ")
        cycle = [int(name[1:]) for name in message.removeprefix("modules need each other: ").split(" -> ")]
        assert cycle[0] == cycle[-1] and len(cycle) >= 3
        assert all(b in needs[a] | wants[a] for a, b in itertools.pairwise(cycle))
        return
    assert sorted(c.name for c in order) == sorted(c.name for c in classes)
    position = {int(c.name[1:]): i for i, c in enumerate(order)}
    assert all(position[b] < position[a] for a in range(count) for b in needs[a] | wants[a])
