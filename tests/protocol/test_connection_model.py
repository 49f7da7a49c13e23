"""The sans-I/O connections' state table walked by hypothesis (RuleBasedStateMachine): a client and
a server end joined by two byte streams, with sends, deliveries cut anywhere, ends of stream, a
peer's bad bytes and closes in any order, each end's state following TRANSITIONS in a model of
its own (and what is refused, refused with ProtocolError), the client's requests in flight those
not yet answered, oldest first."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.connection import (
    TRANSITIONS,
    ClientConnection,
    ConnectionState,
    ProtocolError,
    ServerConnection,
    StateInput,
)

METADATA_RESPONSE = {"brokers": [], "topics": []}
BAD_FRAME = (-1).to_bytes(4, "big", signed=True)  # a negative frame size: the peer's bad bytes


class ConnectionPair(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.client, self.server = ClientConnection("model"), ServerConnection(max_frame_bytes=10_000)
        self.to_server = b""  # bytes the client wrote, not yet delivered
        self.to_client = b""
        self.states = {"client": ConnectionState.OPEN, "server": ConnectionState.OPEN}
        self.expected: list[int] = []  # the model's in-flight correlation ids, oldest first
        self.next_id = 0
        self.pending = {"client": 0, "server": 0}  # bytes delivered that do not make a whole frame yet

    def _end(self, name: str) -> ClientConnection | ServerConnection:
        return self.client if name == "client" else self.server

    def _step(self, name: str, happening: StateInput) -> ConnectionState | None:
        """The model's next state, None where the table refuses."""
        return TRANSITIONS.get((self.states[name], happening))

    @rule(acks_zero=st.booleans())
    def send(self, acks_zero: bool) -> None:
        expected = self._step("client", StateInput.SEND)
        api_key, body = (ApiKey.PRODUCE, {"acks": 0, "timeout_ms": 0, "topic_data": []}) if acks_zero \
            else (ApiKey.METADATA, {"topics": None})
        version = 3 if acks_zero else 1
        if expected is None:
            with pytest.raises(ProtocolError):
                self.client.send_request(api_key, version, body)
            return
        self.to_server += self.client.send_request(api_key, version, body)
        if not acks_zero:
            self.expected.append(self.next_id)
        self.next_id += 1

    def _deliver(self, name: str, data: bytes) -> list[Any] | None:
        """``data`` into one end, the model checking the state; the events, None when refused."""
        end = self._end(name)
        happening = StateInput.RECEIVE if data else StateInput.END_OF_STREAM
        if self._step(name, happening) is None:
            with pytest.raises(ProtocolError):
                end.receive_data(data)
            return None
        # what the peer's end of stream leaves undone is its error: a frame cut, requests unanswered
        refused = not data and (end.buffered_bytes > 0 or (name == "client" and bool(self.expected)))
        self.states[name] = self._step(name, happening) or ConnectionState.CLOSED
        if refused:
            with pytest.raises(ProtocolError):
                end.receive_data(data)
            return None
        events: list[Any] = end.receive_data(data)  # whole valid frames: never refused
        return events

    @precondition(lambda self: self.to_server or self.to_client)
    @rule(name=st.sampled_from(["client", "server"]), cut=st.integers(1, 200))
    def deliver(self, name: str, cut: int) -> None:
        """Up to ``cut`` bytes of what the other end wrote; the server answers each Metadata request."""
        wire = "to_server" if name == "server" else "to_client"
        written = getattr(self, wire)
        if not written:
            return
        setattr(self, wire, written[cut:])
        for event in self._deliver(name, written[:cut]) or ():
            if name == "client":
                assert event.request.correlation_id == self.expected.pop(0)
            elif self.states["server"] is ConnectionState.OPEN and event.api_key == ApiKey.METADATA:
                self.to_client += self.server.send_response(event, METADATA_RESPONSE)

    @rule(name=st.sampled_from(["client", "server"]))
    def end_of_stream(self, name: str) -> None:
        self._deliver(name, b"")

    @rule(name=st.sampled_from(["client", "server"]))
    def bad_bytes(self, name: str) -> None:
        end = self._end(name)
        if end.buffered_bytes:
            return  # the bad size would be read from the frame begun: not bad bytes at all
        wire = "to_server" if name == "server" else "to_client"
        setattr(self, wire, b"")  # the stream so far is lost; the peer sends a bad frame at once
        if self._step(name, StateInput.RECEIVE) is None:
            with pytest.raises(ProtocolError):
                end.receive_data(BAD_FRAME)
            return
        with pytest.raises(ProtocolError) as refused:
            end.receive_data(BAD_FRAME)
        assert str(refused.value)
        self.states[name] = ConnectionState.CLOSED

    @rule(name=st.sampled_from(["client", "server"]))
    def close(self, name: str) -> None:
        self._end(name).close()
        self.states[name] = self._step(name, StateInput.CLOSE) or ConnectionState.CLOSED

    @invariant()
    def states_follow_the_table(self) -> None:
        assert self.client.state is self.states["client"] and self.server.state is self.states["server"]

    @invariant()
    def in_flight_is_what_is_unanswered(self) -> None:
        if self.states["client"] is ConnectionState.OPEN:
            assert [sent.correlation_id for sent in self.client.in_flight] == self.expected


ConnectionPair.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
test_the_connections_follow_their_table = ConnectionPair.TestCase
