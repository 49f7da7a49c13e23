"""The KIP-35 draft's ProtocolVersion must move whenever the served protocol does."""

from __future__ import annotations

from kafkapy import Broker
from kafkapy.server.core import PROTOCOL_HISTORY, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN


def test_protocol_version_matches_what_the_broker_serves() -> None:
    with Broker() as broker:
        assert broker.runtime is not None
        served = frozenset((key, low, high)
                           for key, (low, high) in broker.runtime.dispatcher.served_versions().items())
    assert served == PROTOCOL_HISTORY[PROTOCOL_VERSION], (
        "the served APIs changed: bump PROTOCOL_VERSION and add the change to _PROTOCOL_CHANGES "
        "(and to the history table in docs/broker.md)")
    assert PROTOCOL_VERSION == max(PROTOCOL_HISTORY) and PROTOCOL_VERSION_MIN in PROTOCOL_HISTORY
