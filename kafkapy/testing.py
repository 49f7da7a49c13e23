"""pytest fixtures for an in-process kafkapy broker (registered as the ``kafkapy`` pytest plugin).

Installing kafkapy makes these fixtures (and a marker) available to every test suite:

``kafka_broker``
    A fresh, started :class:`kafkapy.Broker` per test on an ephemeral
    ``PLAINTEXT://127.0.0.1:0`` listener; connect with ``kafka_broker.bootstrap_servers``.

``kafka_broker_factory``
    A callable that starts a broker per call with the configuration given and
    returns it; every broker it started is stopped when the test ends. Broker
    configuration keys contain dots, so pass them either as a mapping or as
    keyword arguments with ``_`` standing for ``.``::

        broker = kafka_broker_factory({"broker.id": 7, "tag.rack-zone": "a"})
        broker = kafka_broker_factory(broker_id=7, advertise_private_api_keys=False)

    Keyword arguments win over the mapping. A key that itself needs an
    underscore (``tag.my_tag``) can only be given in the mapping.

``kafka_faults``
    The ``kafka_broker``'s fault injection (:class:`kafkapy.faults.Faults`), or in a test that
    uses ``kafka_cluster`` alone the cluster's, each rule on every broker
    (:class:`kafkapy.faults.ClusterFaults`): ``kafka_faults.add(FaultRule(...))``; every rule
    is removed when the test ends.

``kafka_cluster``
    Three brokers in one process (``Broker(brokers=3)``), ids 0-2, sharing one store;
    ``kafka_cluster.bootstrap_servers`` lists all three, ``kafka_cluster.brokers[i]`` is one,
    ``kafka_cluster.stop_broker(i)`` / ``start_broker(i)`` take it down and up.
    ``kafka_broker_factory(brokers=5)`` makes other sizes.

``kafka_clock``
    A :class:`kafkapy.server.clock.VirtualClock`. A test that asks for it gets
    ``kafka_broker``, ``kafka_cluster`` and ``kafka_broker_factory``'s brokers on that
    clock: every broker timer waits for ``kafka_clock.advance(seconds)``, which fires
    what falls due, in order, and returns once it has run (docs/testing.md, "Virtual clock"),
    or with ``kafka_clock.autojump_threshold = seconds`` for the loop to be idle that long.

``@pytest.mark.kafka_seed({...})``
    Seeds ``kafka_broker`` and ``kafka_cluster`` before the test (``Broker.seed``'s shape:
    ``{"topic": {"partitions": 3, "config": {...}, "records": [...]}}``).

``kafka_session_broker``
    One started broker for the whole test session (the same defaults and request history as
    ``kafka_broker``); pair it with ``reset()`` between tests to keep them apart.

``kafka_topic``
    A fresh topic per test, with a unique name, deleted after the test: ``kafka_topic.name``,
    ``kafka_topic.bootstrap_servers``, ``kafka_topic.broker``, ``str(kafka_topic)``. It is made
    on the test's own broker when the test has one (``kafka_broker``, ``kafka_cluster``, or
    ``kafka_clock`` or ``kafka_faults``, which bring ``kafka_broker``), else on
    ``kafka_session_broker``. One
    partition unless ``@pytest.mark.kafka_topic(partitions=3, config={...}, records=[...])``
    (one topic of ``Broker.seed``'s shape) or indirect parametrization
    (``@pytest.mark.parametrize("kafka_topic", [3, {"partitions": 2}], indirect=True)``) says
    otherwise.

``@pytest.mark.kafka_strict`` (or ``kafka_strict = true`` in the pytest ini, or
``kafka_broker_factory(strict=True)``)
    Strict mode (kafkapy.strict): the brokers record protocol misuse that Kafka tolerates, and
    the test fails at teardown listing each violation with its decoded request.

Both brokers run on a background thread (``with Broker(...)``), so blocking
clients such as kafka-python can talk to it from the test's thread.

The brokers these fixtures start keep a request history (the RequestHistory
observer, added to ``observer.class.names``): when a test fails, its report
gets a section per broker listing the requests it answered during the test
(API, version, client id, correlation id, error code), the last
``HISTORY_SHOWN`` of them.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, Protocol

import attrs
import pytest

from kafkapy.embedded import Broker, waited_for
from kafkapy.faults import FaultRules
from kafkapy.observers.history import with_history
from kafkapy.server.clock import VirtualClock

__all__ = ["BrokerFactory", "KafkaTopic", "config_from_kwargs", "kafka_broker", "kafka_broker_factory",
           "kafka_clock", "kafka_cluster", "kafka_faults", "kafka_session_broker", "kafka_topic",
           "pytest_addoption", "pytest_configure", "pytest_runtest_makereport", "pytest_runtest_setup",
           "strict_report", "wait_until"]

HISTORY_SHOWN = 200  # requests per broker in a failing test's report: the end of the story
_BROKERS = pytest.StashKey[list[Broker]]()  # the brokers a test's fixtures started
# A shared broker a test used (kafka_topic's), and when the test began using it: its report shows
# only the requests from then on, not the whole session's.
_SHARED_SINCE = pytest.StashKey[tuple[Broker, float]]()


SEED_MARKER = "kafka_seed"
TOPIC_MARKER = "kafka_topic"
STRICT_MARKER = "kafka_strict"  # the marker, and the ini option that makes every test strict
CLUSTER_SIZE = 3  # kafka_cluster: what client test suites written for a real cluster expect


class BrokerFactory(Protocol):
    def __call__(self, config: Mapping[str, Any] | None = None, /, *, brokers: int = 1,
                 strict: bool | None = None, racks: Sequence[str | None] | None = None,
                 **settings: Any) -> Broker: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(STRICT_MARKER, "kafkapy's fixtures start strict brokers: a test whose client misuses the "
                                 "protocol fails (kafkapy.strict)", type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{SEED_MARKER}(data): seed kafka_broker / kafka_cluster with "
                                       "topics and records (kafkapy.Broker.seed's shape)")
    config.addinivalue_line("markers", f"{TOPIC_MARKER}(partitions=1, config=None, records=None): the "
                                       "kafka_topic fixture's topic (one topic of Broker.seed's shape)")
    config.addinivalue_line("markers", f"{STRICT_MARKER}: kafkapy's fixtures start strict brokers; protocol "
                                       "misuse fails the test at teardown (kafkapy.strict)")


# Each marker, and the fixtures it acts through: on a test that uses none of them it would do
# nothing, without a word (kafka_seed on a kafka_topic test seeds no broker the test sees).
_MARKER_FIXTURES: dict[str, tuple[str, ...]] = {
    SEED_MARKER: ("kafka_broker", "kafka_cluster"),
    TOPIC_MARKER: ("kafka_topic",),
    STRICT_MARKER: ("kafka_broker", "kafka_cluster", "kafka_broker_factory"),
}


# The fixtures whose brokers a test's kafka_clock drives (kafka_topic's is then kafka_broker);
# the session's broker keeps real time.
_ON_THE_CLOCK = ("kafka_broker", "kafka_cluster", "kafka_broker_factory", "kafka_topic")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a test whose own kafkapy marker acts through none of its fixtures (a marker on its
    class or module may rightly cover tests that do not use them), and one whose kafka_clock
    drives no broker it uses (the session's broker keeps real time)."""
    used = set(getattr(item, "fixturenames", ()))
    if "kafka_clock" in used and used.isdisjoint(_ON_THE_CLOCK) and "kafka_session_broker" in used:
        pytest.fail("kafka_clock drives the brokers of kafka_broker, kafka_cluster, kafka_broker_factory and "
                    "kafka_topic; kafka_session_broker keeps real time, so advance() would not reach it: use "
                    "kafka_broker (seeded by @pytest.mark.kafka_seed) or kafka_topic with kafka_clock",
                    pytrace=False)
    for marker in item.own_markers:
        wanted = _MARKER_FIXTURES.get(marker.name)
        if wanted is not None and used.isdisjoint(wanted):
            pytest.fail(f"@pytest.mark.{marker.name} acts through {' or '.join(wanted)}, which this test "
                        f"does not use: it would do nothing"
                        + (f" (give kafka_topic's topic with @pytest.mark.{TOPIC_MARKER}(...))"
                           if marker.name == SEED_MARKER and "kafka_topic" in used else ""),
                        pytrace=False)


def config_from_kwargs(config: Mapping[str, Any] | None = None, /, **settings: Any) -> dict[str, Any]:
    """Merge a mapping of broker settings with keyword settings whose ``_`` stand for ``.``."""
    merged = dict(config or {})
    merged.update({name.replace("_", "."): value for name, value in settings.items()})
    return merged


@pytest.fixture
def kafka_broker_factory(request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """Start brokers on demand: ``factory(config_dict)`` or ``factory(broker_id=7)``; all stop at
    teardown. ``factory(brokers=3, racks=["a", "b", "c"])``: a cluster, each broker in its rack."""
    started: list[Broker] = []
    request.node.stash[_BROKERS] = started
    clock = _virtual_clock(request)
    strict_by_default = (request.node.get_closest_marker(STRICT_MARKER) is not None
                         or bool(request.config.getini(STRICT_MARKER)))

    def factory(config: Mapping[str, Any] | None = None, /, *, brokers: int = 1, strict: bool | None = None,
                racks: Sequence[str | None] | None = None, **settings: Any) -> Broker:
        broker = Broker(with_history(config_from_kwargs(config, **settings)), brokers=brokers, clock=clock,
                        strict=strict_by_default if strict is None else strict, racks=racks)
        broker.__enter__()
        started.append(broker)
        return broker

    try:
        yield factory
    finally:
        misuse = strict_report(started)  # read while the brokers run; reported once they are stopped
        errors: list[BaseException] = []
        for broker in reversed(started):
            try:
                broker.close()
            except BaseException as exc:  # stop the others before reporting
                errors.append(exc)
        if errors:
            raise errors[0]
        if misuse:
            pytest.fail(misuse, pytrace=False)


def strict_report(brokers: list[Broker]) -> str:
    """What strict brokers recorded, as a failing test shows it; empty when nothing was."""
    sections = []
    for broker in brokers:
        try:
            violations = broker.violations
        except RuntimeError:  # not strict
            continue
        if violations:
            sections.append(f"kafkapy strict mode: {len(violations)} protocol violation(s) on "
                            f"{_where(broker)}\n{violations.report()}")
    return "\n".join(sections)


@pytest.fixture
def kafka_clock() -> VirtualClock:
    """A virtual clock; the test's brokers (kafka_broker, kafka_cluster, kafka_broker_factory) run on
    it when the test asks for it."""
    return VirtualClock()


def _virtual_clock(request: pytest.FixtureRequest) -> VirtualClock | None:
    """The test's kafka_clock, if it asked for one (whichever fixture pytest set up first)."""
    if "kafka_clock" not in request.fixturenames:
        return None
    clock = request.getfixturevalue("kafka_clock")
    assert isinstance(clock, VirtualClock)
    return clock


def _seeded(request: pytest.FixtureRequest, broker: Broker) -> Broker:
    for marker in reversed(list(request.node.iter_markers(SEED_MARKER))):  # the closest seeds last
        if len(marker.args) != 1 or marker.kwargs:
            raise pytest.UsageError(f"@pytest.mark.{SEED_MARKER} takes one mapping: {{topic: {{...}}}}")
        broker.seed(marker.args[0])
    return broker


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest, kafka_broker_factory: BrokerFactory) -> Broker:
    """A started broker with the embedded defaults, seeded by ``kafka_seed`` markers, stopped
    after the test."""
    return _seeded(request, kafka_broker_factory())


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, kafka_broker_factory: BrokerFactory) -> Broker:
    """Three started brokers in one process sharing one store, seeded by ``kafka_seed`` markers,
    stopped after the test."""
    return _seeded(request, kafka_broker_factory(brokers=CLUSTER_SIZE))


@pytest.fixture
def kafka_faults(request: pytest.FixtureRequest) -> Iterator[FaultRules]:
    """``kafka_broker``'s faults, or ``kafka_cluster``'s (every broker's) in a test that uses the
    cluster alone; the rules a test adds are removed when it ends."""
    used = request.fixturenames
    faulted = "kafka_cluster" if "kafka_cluster" in used and "kafka_broker" not in used else "kafka_broker"
    faults = request.getfixturevalue(faulted).faults
    try:
        yield faults
    finally:
        faults.clear()


# --- kafka_session_broker, kafka_topic ---------------------------------------------------------

_TOPIC_NAME_MAX = 200  # Kafka allows 249 characters; room left for the unique suffix
_ILLEGAL_IN_TOPIC = re.compile(r"[^a-zA-Z0-9._-]+")  # Kafka's legal topic characters


@attrs.frozen
class KafkaTopic:
    """The ``kafka_topic`` fixture's topic: its name and the broker that holds it."""

    name: str
    partitions: int
    broker: Broker = attrs.field(repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    def __str__(self) -> str:
        return self.name


@pytest.fixture(scope="session")
def kafka_session_broker() -> Iterator[Broker]:
    """One started broker for the whole session (with a request history), stopped at its end."""
    with Broker(with_history({})) as broker:
        yield broker


def _topic_spec(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The topic asked for: indirect parametrization (a partition count or a mapping) wins over
    the closest ``kafka_topic`` marker; one partition when neither says."""
    spec: dict[str, Any] = {"partitions": 1}
    marker = request.node.get_closest_marker(TOPIC_MARKER)
    if marker is not None:
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{TOPIC_MARKER} takes keywords: "
                                    "partitions=, config=, records=")
        spec.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, int) and not isinstance(param, bool):
        spec["partitions"] = param
    elif isinstance(param, Mapping):
        spec.update(param)
    elif param is not None:
        raise pytest.UsageError(f"kafka_topic's parameter is a partition count or a mapping, not {param!r}")
    return spec


def _topic_home(request: pytest.FixtureRequest) -> str:
    """The fixture whose broker holds kafka_topic's topic: the test's own broker when it has one
    (kafka_cluster alone, else kafka_broker, which kafka_clock and kafka_faults also imply: the
    session's broker keeps real time and has no test's rules), so
    ``kafka_broker.records(kafka_topic.name)``, ``kafka_clock.advance`` and ``kafka_faults`` reach
    the topic; the session's broker otherwise."""
    used = request.fixturenames
    if "kafka_cluster" in used and "kafka_broker" not in used:
        return "kafka_cluster"
    if not {"kafka_broker", "kafka_clock", "kafka_faults"}.isdisjoint(used):
        return "kafka_broker"
    return "kafka_session_broker"


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest) -> Iterator[KafkaTopic]:
    """A topic of its own for this test, on the test's broker or else the session's; deleted
    after it (with the test's broker, which stops)."""
    spec = _topic_spec(request)
    stem = _ILLEGAL_IN_TOPIC.sub("-", request.node.name).strip("-.")[:_TOPIC_NAME_MAX] or "topic"
    name = f"{stem}-{uuid.uuid4().hex[:12]}"
    home = _topic_home(request)
    broker = request.getfixturevalue(home)
    assert isinstance(broker, Broker)
    shared = home == "kafka_session_broker"
    if shared:
        request.node.stash[_SHARED_SINCE] = (broker, time.time())
    broker.seed({name: spec})
    try:
        yield KafkaTopic(name, int(spec["partitions"]), broker)
    finally:
        if shared:
            broker.delete_topics(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A failing test's report gets the request history of the brokers its fixtures started."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for started in item.stash.get(_BROKERS, []):
        for broker in started.brokers:  # each broker of a cluster has its own history
            report.sections.append((f"kafkapy request history ({_where(broker)})", _history_text(broker)))
    shared = item.stash.get(_SHARED_SINCE, None)
    if shared is not None:
        broker, since = shared
        report.sections.append((f"kafkapy request history ({_where(broker)}, the session's broker, "
                                "during this test)", _history_text(broker, since)))


def _where(broker: Broker) -> str:
    try:
        return broker.bootstrap_servers
    except Exception:
        return "a stopped broker"


def _history_text(broker: Broker, since: float | None = None) -> str:
    try:
        entries = broker.history(since=since)
    except RuntimeError as exc:
        return str(exc)
    shown = entries[-HISTORY_SHOWN:]
    skipped = f"... {len(entries) - len(shown)} earlier requests\n" if len(entries) > len(shown) else ""
    return skipped + "\n".join(str(entry) for entry in shown) if entries else "(no requests)"


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str | None = None) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail the test with
    an AssertionError naming ``what`` (else the predicate, or where its lambda is) after
    ``timeout`` seconds. For cluster state that settles asynchronously (watches, elections,
    rebalances)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or waited_for(predicate)}")
        time.sleep(0.02)
