"""The SASL authenticator's state table, walked by a model of Kafka's rules written apart from it
(Hypothesis RuleBasedStateMachine): any sequence of frames gets the step Kafka would take."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.sasl.authenticator import TRANSITIONS, Authenticator, SaslState, Step
from kafkapy.server.sasl.settings import SaslSettings

SERVED_API_VERSIONS = range(0, 5)


class AuthenticatorModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.authenticator = Authenticator(SaslSettings(("PLAIN",), {"alice": "secret"}), "test",
                                           lambda v: v in SERVED_API_VERSIONS)
        # The model: what Kafka's SaslServerAuthenticator has seen so far.
        self.api_versions_answered = False
        self.handshake_version: int | None = None
        self.authenticated = False
        self.failed = False
        self.correlation = 0

    def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Step:
        self.correlation += 1
        return self.authenticator.receive(encode_request(api_key, version, self.correlation, "m", body))

    def _expect_closed(self, step: Step) -> None:
        assert step.close and not step.dispatch
        self.failed = True

    @precondition(lambda self: not self.failed and not self.authenticated)
    @rule(version=st.integers(0, 6))
    def api_versions(self, version: int) -> None:
        step = self._request(ApiKey.API_VERSIONS, min(version, 4), {}) if version <= 4 else \
            self.authenticator.receive(b"\x00\x12\x00" + bytes([version]) + b"\x00\x00\x00\x01\xff\xff")
        allowed = not self.api_versions_answered and self.handshake_version is None
        if not allowed:
            self._expect_closed(step)
            return
        assert step == Step(dispatch=True)
        self.api_versions_answered = version in SERVED_API_VERSIONS

    @precondition(lambda self: not self.failed and not self.authenticated)
    @rule(version=st.sampled_from([0, 1]), mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "plain", ""]))
    def handshake(self, version: int, mechanism: str) -> None:
        step = self._request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})
        if self.handshake_version is not None:
            self._expect_closed(step)
            assert step.response is None
            return
        assert step.response is not None
        answer = decode_response(step.response, ApiKey.SASL_HANDSHAKE, version).body
        assert answer["mechanisms"] == ["PLAIN"]
        if mechanism == "PLAIN":
            assert answer["error_code"] == ErrorCode.NONE and not step.close
            self.handshake_version = version
        else:
            assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            self._expect_closed(step)

    @precondition(lambda self: not self.failed and not self.authenticated)
    @rule(good=st.booleans(), version=st.integers(0, 2))
    def token(self, good: bool, version: int) -> None:
        token = b"\0alice\0" + (b"secret" if good else b"wrong")
        if self.handshake_version == 0:
            step = self.authenticator.receive(token)
            if good:
                assert step == Step(response=b"")
                self.authenticated = True
            else:
                self._expect_closed(step)
                assert step.response is None
            return
        step = self._request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})
        if self.handshake_version is None:  # before the handshake: unexpected
            self._expect_closed(step)
            assert step.response is None
            return
        assert step.response is not None
        answer = decode_response(step.response, ApiKey.SASL_AUTHENTICATE, version).body
        if good:
            assert answer["error_code"] == ErrorCode.NONE and not step.close
            self.authenticated = True
        else:
            assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert answer["error_message"] == "Authentication failed: Invalid username or password"
            self._expect_closed(step)

    @precondition(lambda self: not self.failed and not self.authenticated and self.handshake_version != 0)
    @rule(api_key=st.sampled_from([ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER]))
    def other_request(self, api_key: ApiKey) -> None:
        version = {ApiKey.METADATA: 1, ApiKey.FIND_COORDINATOR: 0, ApiKey.DESCRIBE_CLUSTER: 0}[api_key]
        step = self._request(api_key, version, {})
        self._expect_closed(step)
        assert step.response is None

    @precondition(lambda self: not self.failed and not self.authenticated and self.handshake_version != 0)
    @rule(garbage=st.binary(max_size=12))
    def short_or_garbage_frame(self, garbage: bytes) -> None:
        step = self.authenticator.receive(garbage)
        assert step.close or step.dispatch or step.response is not None  # one of Kafka's outcomes
        if step.close:
            self.failed = True
        else:  # garbage that reads as one of the three requests the gate lets through: start over
            self.start()

    @precondition(lambda self: self.authenticated)
    @rule(api_key=st.sampled_from([ApiKey.METADATA, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE]))
    def after_authentication_everything_goes_to_the_dispatcher(self, api_key: ApiKey) -> None:
        assert self._request(api_key, 1, {}) == Step(dispatch=True)

    @precondition(lambda self: self.failed or self.authenticated)
    @rule()
    def reconnect(self) -> None:
        self.start()

    @invariant()
    def state_agrees(self) -> None:
        if not hasattr(self, "authenticator"):
            return
        assert self.authenticator.complete == self.authenticated
        assert (self.authenticator.state is SaslState.FAILED) == self.failed
        if self.authenticated:
            assert self.authenticator.principal == "User:alice"


TestAuthenticatorModel = AuthenticatorModel.TestCase


def test_every_transition_leads_somewhere_listed() -> None:
    """The table's targets are states, and COMPLETE is reached only by an accepted token."""
    assert {target for target in TRANSITIONS.values()} <= set(SaslState)
    assert {event.name for (_, event), target in TRANSITIONS.items() if target is SaslState.COMPLETE} == {
        "TOKEN_ACCEPTED"}
