"""The SASL authenticator's state table, walked by a model of Kafka's rules written apart from it
(Hypothesis RuleBasedStateMachine): any sequence of frames gets the step Kafka would take."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.sasl.authenticator import TRANSITIONS, Authenticator, SaslState, Step
from kafkapy.server.sasl.scram import MECHANISMS, credential_from_salted_password, salted_password
from kafkapy.server.sasl.settings import SaslSettings
from kafkapy.server.sasl.unsecured_jws import make_unsecured_jws

SERVED_API_VERSIONS = range(0, 5)
_SCRAM = MECHANISMS["SCRAM-SHA-256"]
_SALT = b"model-salt"
BOB = credential_from_salted_password(_SCRAM, _SALT, salted_password(_SCRAM, "bob-pw", _SALT, 4096), 4096)


def scram_final(server_first: bytes, password: str) -> bytes:
    """The client's final message (RFC 5802) for client-first ``n,,n=bob,r=cn``."""
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = salted_password(_SCRAM, password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = _SCRAM.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"n=bob,r=cn,{server_first.decode()},{without_proof}".encode()
    signature = _SCRAM.hmac(_SCRAM.hash(client_key), auth_message)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    return f"{without_proof},p={proof.decode()}".encode()


class AuthenticatorModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        settings = SaslSettings(("PLAIN", "SCRAM-SHA-256"), {"alice": "secret"})
        self.authenticator = Authenticator(settings, "test", lambda v: v in SERVED_API_VERSIONS,
                                           lambda mechanism, user: BOB if user == "bob" else None)
        # The model: what Kafka's SaslServerAuthenticator has seen so far.
        self.api_versions_answered = False
        self.handshake_version: int | None = None
        self.mechanism: str | None = None
        self.authenticated = False
        self.failed = False
        self.correlation = 0

    def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Step:
        self.correlation += 1
        return self.authenticator.receive(encode_request(api_key, version, self.correlation, "m", body))

    def _expect_closed(self, step: Step) -> None:
        assert step.close and not step.dispatch
        self.failed = True

    def _expect_illegal_state(self, step: Step, api_key: int, version: int) -> None:
        """After a v1 handshake, a request other than SaslAuthenticate gets its error response."""
        assert step.response is not None
        answer = decode_response(step.response, api_key, version)
        assert answer.correlation_id == self.correlation
        if api_key != ApiKey.METADATA:  # Metadata naming no topic has nowhere to carry it
            assert answer.body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE

    @precondition(lambda self: not self.failed and not self.authenticated)
    @rule(version=st.integers(0, 6), software=st.sampled_from(["kafkapy", "bad name", ""]))
    def api_versions(self, version: int, software: str) -> None:
        body = {"client_software_name": software, "client_software_version": "1.0"} if version >= 3 else {}
        step = self._request(ApiKey.API_VERSIONS, min(version, 4), body) if version <= 4 else \
            self.authenticator.receive(b"\x00\x12\x00" + bytes([version]) + b"\x00\x00\x00\x01\xff\xff")
        allowed = not self.api_versions_answered and self.handshake_version is None
        if not allowed:
            self._expect_closed(step)
            if self.handshake_version == 1 and version <= 4:  # Kafka's handleSaslToken answers it
                self._expect_illegal_state(step, ApiKey.API_VERSIONS, version)
            return
        assert step == Step(dispatch=True)
        # An error answer (a version not served; v3+ with invalid client software) lets the client retry.
        self.api_versions_answered = version in SERVED_API_VERSIONS and (version < 3 or software == "kafkapy")

    @precondition(lambda self: not self.failed and not self.authenticated)
    @rule(version=st.sampled_from([0, 1]),
          mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "plain", ""]))
    def handshake(self, version: int, mechanism: str) -> None:
        step = self._request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})
        if self.handshake_version is not None:
            self._expect_closed(step)
            if self.handshake_version == 1:
                self._expect_illegal_state(step, ApiKey.SASL_HANDSHAKE, version)
            else:  # a bare token PLAIN cannot read
                assert step.response is None
            return
        assert step.response is not None
        answer = decode_response(step.response, ApiKey.SASL_HANDSHAKE, version).body
        assert answer["mechanisms"] == ["PLAIN", "SCRAM-SHA-256"]
        if mechanism in ("PLAIN", "SCRAM-SHA-256"):
            assert answer["error_code"] == ErrorCode.NONE and not step.close
            self.handshake_version = version
            self.mechanism = mechanism
        else:
            assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            self._expect_closed(step)

    @precondition(lambda self: not (self.failed or self.authenticated) and self.mechanism == "SCRAM-SHA-256")
    @rule(good=st.booleans(), version=st.integers(0, 2))
    def scram_exchange(self, good: bool, version: int) -> None:
        """Two tokens: the first is challenged (the state stays), the second completes or fails."""
        password = "bob-pw" if good else "wrong"
        if self.handshake_version == 0:
            first = self.authenticator.receive(b"n,,n=bob,r=cn")
            assert not first.close and first.response is not None
            assert self.authenticator.state is SaslState.RAW_TOKEN
            final = self.authenticator.receive(scram_final(first.response, password))
            if good:
                assert final.response is not None and final.response.startswith(b"v=") and not final.close
                self.authenticated = True
            else:
                self._expect_closed(final)
            return
        first = self._request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": b"n,,n=bob,r=cn"})
        assert first.response is not None and not first.close
        assert self.authenticator.state is SaslState.AUTHENTICATE
        challenge = decode_response(first.response, ApiKey.SASL_AUTHENTICATE, version).body["auth_bytes"]
        final = self._request(ApiKey.SASL_AUTHENTICATE, version,
                              {"auth_bytes": scram_final(challenge, password)})
        assert final.response is not None
        answer = decode_response(final.response, ApiKey.SASL_AUTHENTICATE, version).body
        if good:
            assert answer["error_code"] == ErrorCode.NONE and answer["auth_bytes"].startswith(b"v=")
            self.authenticated = True
        else:
            assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            self._expect_closed(final)

    @precondition(lambda self: not (self.failed or self.authenticated) and self.mechanism != "SCRAM-SHA-256")
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
        if self.handshake_version == 1:
            self._expect_illegal_state(step, api_key, version)
        else:  # before the handshake: no answer
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
            expected = "User:bob" if self.mechanism == "SCRAM-SHA-256" else "User:alice"
            assert self.authenticator.principal == expected


TestAuthenticatorModel = AuthenticatorModel.TestCase


def test_every_transition_leads_somewhere_listed() -> None:
    """The table's targets are states, and COMPLETE is entered only by an accepted token (a
    session's own requests keep it there)."""
    assert {target for target in TRANSITIONS.values()} <= set(SaslState)
    assert {event.name for (source, event), target in TRANSITIONS.items()
            if target is SaslState.COMPLETE and source is not SaslState.COMPLETE} == {"TOKEN_ACCEPTED"}
    assert {event.name for (source, event), target in TRANSITIONS.items()
            if source is target is SaslState.COMPLETE} == {"SESSION_REQUEST"}


class SessionModel(RuleBasedStateMachine):
    """KIP-368 on one connection, against a model of Kafka's rules written apart from the table:
    sessions end at connections.max.reauth.ms (PLAIN) or at the token's exp (OAUTHBEARER), a
    SaslHandshake in session re-authenticates (at most once a second; the mechanism and the
    principal must stay), and the first other request after the end closes the connection."""

    MAX_REAUTH_MS = 10_000

    @initialize(mechanism=st.sampled_from(["PLAIN", "OAUTHBEARER"]), token_s=st.integers(1, 30))
    def start(self, mechanism: str, token_s: int) -> None:
        self.now_ms = 1_700_000_000_000  # the broker's clock: the test moves it
        self._connect(mechanism, token_s)

    @precondition(lambda self: self.closed)
    @rule(mechanism=st.sampled_from(["PLAIN", "OAUTHBEARER"]), token_s=st.integers(1, 30))
    def reconnect(self, mechanism: str, token_s: int) -> None:
        self._connect(mechanism, token_s)

    def _connect(self, mechanism: str, token_s: int) -> None:
        settings = SaslSettings(("PLAIN", "OAUTHBEARER"), {"alice": "secret", "bob": "pw"},
                                max_reauth_ms={"PLAIN": self.MAX_REAUTH_MS, "OAUTHBEARER": 0})
        self.authenticator = Authenticator(settings, "model", lambda v: True, now_ms=lambda: self.now_ms)
        self.correlation = 0
        self.closed = False
        self.last_reauth_ms: int | None = None
        self.mechanism, self.user = mechanism, "alice"
        answer = self._exchange(mechanism, "alice", token_s)
        assert answer is not None and answer["error_code"] == ErrorCode.NONE
        self.session_end = self.now_ms + self._lifetime(mechanism, token_s)
        assert answer["session_lifetime_ms"] == self._lifetime(mechanism, token_s)

    def _lifetime(self, mechanism: str, token_s: int) -> int:
        """What is left of the session: a token expires at whole seconds (its exp)."""
        if mechanism == "PLAIN":
            return self.MAX_REAUTH_MS
        return (self.now_ms // 1000 + token_s) * 1000 - self.now_ms

    def _token(self, mechanism: str, user: str, token_s: int) -> bytes:
        if mechanism == "PLAIN":
            return f"\0{user}\0{'secret' if user == 'alice' else 'pw'}".encode()
        jws = make_unsecured_jws({"sub": user, "exp": self.now_ms // 1000 + token_s})
        return f"n,,\x01auth=Bearer {jws}\x01\x01".encode()

    def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Step:
        self.correlation += 1
        return self.authenticator.receive(encode_request(api_key, version, self.correlation, "m", body))

    def _exchange(self, mechanism: str, user: str, token_s: int) -> dict[str, Any] | None:
        """Handshake then token; the SaslAuthenticate answer, or None if the connection closed unanswered."""
        step = self._request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        assert step.response is not None and not step.close
        assert decode_response(step.response, ApiKey.SASL_HANDSHAKE, 1).body["error_code"] == ErrorCode.NONE
        token = self._token(mechanism, user, token_s)
        step = self._request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        if step.response is None:
            assert step.close
            return None
        return dict(decode_response(step.response, ApiKey.SASL_AUTHENTICATE, 2).body)

    @precondition(lambda self: not self.closed)
    @rule(ms=st.sampled_from([1, 500, 999, 1000, 4000, 9000, 10_000, 30_000]))
    def advance(self, ms: int) -> None:
        self.now_ms += ms

    @precondition(lambda self: not self.closed)
    @rule(api_key=st.sampled_from([ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.SASL_AUTHENTICATE]))
    def request(self, api_key: ApiKey) -> None:
        step = self._request(api_key, 1, {})
        if self.now_ms > self.session_end:
            assert step == Step(close=True)
            self.closed = True
        else:
            assert step == Step(dispatch=True)

    @precondition(lambda self: not self.closed)
    @rule(mechanism=st.sampled_from(["PLAIN", "OAUTHBEARER"]), user=st.sampled_from(["alice", "bob"]),
          token_s=st.integers(1, 30))
    def re_authenticate(self, mechanism: str, user: str, token_s: int) -> None:
        if self.last_reauth_ms is not None and self.now_ms - self.last_reauth_ms < 1000:
            # Too soon: the handshake is an ordinary request (or the session has ended).
            step = self._request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
            self.closed = self.now_ms > self.session_end
            assert step == (Step(close=True) if self.closed else Step(dispatch=True))
            return
        self.last_reauth_ms = self.now_ms
        answer = self._exchange(mechanism, user, token_s)
        if mechanism != self.mechanism:
            assert answer is None
            self.closed = True
        elif user != self.user:
            assert answer is not None and answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert answer["error_message"] == f"Cannot change principals during re-authentication from " \
                                              f"User.{self.user}: User.{user}"
            self.closed = True
        else:
            assert answer is not None and answer["error_code"] == ErrorCode.NONE
            assert answer["session_lifetime_ms"] == self._lifetime(mechanism, token_s)
            self.session_end = self.now_ms + self._lifetime(mechanism, token_s)

    @invariant()
    def state_agrees(self) -> None:
        if not hasattr(self, "authenticator"):
            return
        assert (self.authenticator.state is SaslState.FAILED) == self.closed
        if not self.closed:
            assert self.authenticator.complete and self.authenticator.session_end_ms == self.session_end
            assert self.authenticator.principal == f"User:{self.user}"


TestSessionModel = SessionModel.TestCase
