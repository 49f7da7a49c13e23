"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator runs it (sans-I/O).

Theory of operation
-------------------
A connection on a SASL listener starts unauthenticated; every frame it sends goes through
``Authenticator.receive`` until the state is COMPLETE, and from then on straight to the dispatcher
(unless the session has an end: re-authentication, below).
Each frame is classified into an Event, TRANSITIONS gives the next state, and anything the table
does not list is FAILED: the connection closes (after the answer, if the event has one). As in Kafka:

* ApiVersions is served once, before the handshake (the dispatcher answers it: ``Step.dispatch``);
  one at a version the broker does not serve (UNSUPPORTED_VERSION), or a v3+ one whose client
  software name or version is not valid (INVALID_REQUEST), is answered by the dispatcher and the
  client may try again (Kafka's handleApiVersionsRequest moves on only after a good one).
* SaslHandshake names the mechanism. An enabled one is accepted with the enabled list; any other
  gets UNSUPPORTED_SASL_MECHANISM with the list, and the connection closes. Handshake v1 means the
  tokens come in SaslAuthenticate requests; v0 means they come as bare size-prefixed frames with
  no Kafka header, and so do the challenges (KIP-152 added v1; v0 is what 0.10 clients sent).
* A token the mechanism refuses gets SASL_AUTHENTICATION_FAILED with the mechanism's message
  (bare tokens cannot carry one: the connection just closes), one log line, and the connection
  closes. A token the mechanism cannot parse gets Kafka's generic message instead.
* Any other request before the handshake is "Unexpected Kafka request of type X during SASL
  handshake" in the log, and the connection closes with no answer. After a v1 handshake, any request
  but SaslAuthenticate ("... during SASL authentication") is answered with its own error response,
  ILLEGAL_SASL_STATE, before the close (Kafka's handleSaslToken builds it; one that does not parse
  gets no answer).

Re-authentication (KIP-368), as Kafka's SaslServerAuthenticator and SocketServer run it:

* When an exchange completes, the session gets an end if the mechanism's
  ``connections.max.reauth.ms`` is above 0 or the credential expires (an OAUTHBEARER token's
  ``exp``): the sooner of the two. SaslAuthenticate v1+ tells the client how long it has
  (``session_lifetime_ms``; 0 when the session has no end, and the connection is then as before).
* A session with an end keeps its frames coming through ``receive`` (``gating``). A SaslHandshake
  there starts a re-authentication on the same connection (at most one a second; one sooner is
  answered by the dispatcher, ILLEGAL_SASL_STATE): the same exchange as the first, but the
  mechanism must be the one used before (else the handshake is answered and the next token closes
  the connection with no answer) and the principal must not change ("Cannot change principals
  during re-authentication from User.alice: User.bob"). The new session gets a new end.
* Any other request after the session's end closes the connection without an answer (Kafka's
  "Disconnecting expired channel"): a client that does not re-authenticate is cut off at its
  next request.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable

import attrs

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol import api_name, decode_request, encode_response, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.error_answers import error_answer
from kafkapy.protocol.header import REQUEST_PREFIX_SIZE, unpack_request_prefix
from kafkapy.server.core import valid_client_software
from kafkapy.server.sasl.mechanism import AuthenticationFailed, MalformedResponse, SaslServer
from kafkapy.server.sasl.scram import CredentialLookup
from kafkapy.server.sasl.settings import SaslSettings

__all__ = ["TRANSITIONS", "Authenticator", "Event", "SaslState", "Step"]

log = logging.getLogger(__name__)


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS"  # nothing yet: ApiVersions or SaslHandshake
    HANDSHAKE = "HANDSHAKE"  # ApiVersions answered: SaslHandshake
    AUTHENTICATE = "AUTHENTICATE"  # handshake v1 accepted: SaslAuthenticate requests
    RAW_TOKEN = "RAW_TOKEN"  # handshake v0 accepted: bare tokens
    COMPLETE = "COMPLETE"  # authenticated: every request goes to the dispatcher
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"  # re-authentication asked for another mechanism
    FAILED = "FAILED"  # the connection closes


class Event(enum.Enum):
    API_VERSIONS = "ApiVersions"
    API_VERSIONS_UNSERVED = "ApiVersions answered with an error (version not served, bad client software)"
    HANDSHAKE_V0 = "SaslHandshake v0, mechanism enabled"
    HANDSHAKE_V1 = "SaslHandshake v1, mechanism enabled"
    MECHANISM_REFUSED = "SaslHandshake, mechanism not enabled"
    MECHANISM_CHANGED = "SaslHandshake re-authenticating, mechanism enabled but not the session's"
    AUTHENTICATE = "SaslAuthenticate"
    RAW_TOKEN = "a bare token"
    TOKEN_CHALLENGED = "token accepted, more to come"  # (SCRAM's first message)
    TOKEN_ACCEPTED = "token accepted, exchange complete"
    TOKEN_REFUSED = "token refused"
    OTHER_REQUEST = "any other request"
    SESSION_REQUEST = "a request within the session"
    SESSION_EXPIRED = "a request after the session's end"


S, E = SaslState, Event
# (state, event) -> next state. What is missing leads to FAILED.
TRANSITIONS: dict[tuple[SaslState, Event], SaslState] = {
    (S.HANDSHAKE_OR_VERSIONS, E.API_VERSIONS): S.HANDSHAKE,
    (S.HANDSHAKE_OR_VERSIONS, E.API_VERSIONS_UNSERVED): S.HANDSHAKE_OR_VERSIONS,
    (S.HANDSHAKE_OR_VERSIONS, E.HANDSHAKE_V1): S.AUTHENTICATE,
    (S.HANDSHAKE_OR_VERSIONS, E.HANDSHAKE_V0): S.RAW_TOKEN,
    (S.HANDSHAKE, E.HANDSHAKE_V1): S.AUTHENTICATE,
    (S.HANDSHAKE, E.HANDSHAKE_V0): S.RAW_TOKEN,
    (S.AUTHENTICATE, E.TOKEN_CHALLENGED): S.AUTHENTICATE,
    (S.AUTHENTICATE, E.TOKEN_ACCEPTED): S.COMPLETE,
    (S.RAW_TOKEN, E.TOKEN_CHALLENGED): S.RAW_TOKEN,
    (S.RAW_TOKEN, E.TOKEN_ACCEPTED): S.COMPLETE,
    # A session with an end (KIP-368): its requests, and the SaslHandshake that re-authenticates.
    (S.COMPLETE, E.SESSION_REQUEST): S.COMPLETE,
    (S.COMPLETE, E.HANDSHAKE_V1): S.AUTHENTICATE,
    (S.COMPLETE, E.HANDSHAKE_V0): S.RAW_TOKEN,
    (S.COMPLETE, E.MECHANISM_CHANGED): S.REAUTH_BAD_MECHANISM,
}
# The states in which a Kafka request is read as SaslHandshake-or-ApiVersions, for the log's wording.
_HANDSHAKING = (S.HANDSHAKE_OR_VERSIONS, S.HANDSHAKE)
MIN_REAUTH_INTERVAL_MS = 1000  # KafkaChannel's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


@attrs.frozen
class Step:
    """What the connection does with one frame: hand it to the dispatcher, or write ``response``
    (a frame body, no size prefix) if any; then close if ``close``."""

    dispatch: bool = False
    response: bytes | None = None
    close: bool = False


DISPATCH = Step(dispatch=True)
CLOSE = Step(close=True)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class Authenticator:
    """The SASL state of one connection. ``api_versions_served(version)`` says whether the
    dispatcher serves ApiVersions at that version (it answers the request either way);
    ``scram_credentials(mechanism, user)`` gives SCRAM's stored credentials; ``now_ms()`` is the
    broker's wall clock (token expiry and session ends move with a VirtualClock)."""

    def __init__(self, settings: SaslSettings, who: str, api_versions_served: Callable[[int], bool],
                 scram_credentials: CredentialLookup = lambda mechanism, user: None,
                 now_ms: Callable[[], int] = _wall_ms) -> None:
        self.settings = settings
        self.scram_credentials = scram_credentials
        self.who = who  # the connection, for the log
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.server: SaslServer | None = None
        self._api_versions_served = api_versions_served
        self._now_ms = now_ms
        self.session_end_ms: int | None = None  # when the session ends (KIP-368); None: never
        self.session_lifetime_ms = 0  # what SaslAuthenticate tells the client
        self.authentications = 0  # exchanges completed on this connection (re-authentications: the rest)
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating
        self._reauth_started_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def gating(self) -> bool:
        """Whether the connection must hand its frames to ``receive``: until authenticated, and
        for as long as the session has an end (to re-authenticate, or be closed after it)."""
        return self.state is not SaslState.COMPLETE or self.session_end_ms is not None

    @property
    def principal(self) -> str:
        """Kafka's default principal for a SASL connection: User:<authorization id>."""
        assert self.server is not None and self.server.complete
        return f"User:{self.server.authorization_id}"

    @property
    def _during(self) -> str:
        return "re-authentication" if self._previous is not None else "authentication"

    def _move(self, event: Event) -> SaslState:
        self.state = TRANSITIONS.get((self.state, event), SaslState.FAILED)
        return self.state

    def receive(self, frame: bytes | bytearray) -> Step:
        """The next frame the client sent (without its size prefix)."""
        if self.state is SaslState.COMPLETE:
            return DISPATCH if self.session_end_ms is None else self._in_session(frame)
        frame = bytes(frame)
        if self.state is SaslState.RAW_TOKEN:
            return self._raw_token(frame)
        if self.state is SaslState.REAUTH_BAD_MECHANISM:
            assert self._previous is not None and self.server is not None
            log.info("Failed re-authentication with %s (SASL mechanism '%s' requested by client is not "
                     "supported for re-authentication of mechanism '%s')", self.who, self.server.mechanism,
                     self._previous[0])
            self.state = SaslState.FAILED
            return CLOSE
        if len(frame) < REQUEST_PREFIX_SIZE:
            log.info("Failed authentication with %s (a %d-byte frame is no Kafka request)", self.who,
                     len(frame))
            self.state = SaslState.FAILED
            return CLOSE
        api_key, api_version, _ = unpack_request_prefix(frame, 0)
        during = "handshake" if self.state in _HANDSHAKING else self._during
        if self.state is SaslState.AUTHENTICATE and api_key != ApiKey.SASL_AUTHENTICATE:
            return self._out_of_place(frame, api_key)
        if api_key == ApiKey.API_VERSIONS:
            served = self._api_versions_served(api_version) and self._valid_software(frame, api_version)
            event = Event.API_VERSIONS if served else Event.API_VERSIONS_UNSERVED
            if self._move(event) is not SaslState.FAILED:
                return DISPATCH
        elif api_key == ApiKey.SASL_HANDSHAKE and self.state in _HANDSHAKING:
            return self._handshake(frame)
        elif api_key == ApiKey.SASL_AUTHENTICATE and self.state is SaslState.AUTHENTICATE:
            return self._authenticate(frame)
        else:
            self._move(Event.OTHER_REQUEST)
        log.info("Failed authentication with %s (Unexpected Kafka request of type %s during SASL %s.)",
                 self.who, _name(api_key), during)
        self.state = SaslState.FAILED
        return CLOSE

    @staticmethod
    def _valid_software(frame: bytes, api_version: int) -> bool:
        """Whether a served ApiVersions is answered without error: v3+ names its client software
        validly (one that does not decode is left to the dispatcher, and does not count)."""
        if api_version < 3:
            return True
        try:
            body = decode_request(frame).body
        except DecodeError:
            return False
        return valid_client_software(str(body.get("client_software_name", "")),
                                     str(body.get("client_software_version", "")))

    def _in_session(self, frame: bytes | bytearray) -> Step:
        """A frame of a session that ends: a re-authentication, the session's request, or the close
        of a session past its end (SocketServer.processCompletedReceives' order)."""
        assert self.session_end_ms is not None
        now = self._now_ms()
        api_key = unpack_request_prefix(frame, 0)[0] if len(frame) >= REQUEST_PREFIX_SIZE else -1
        if api_key == ApiKey.SASL_HANDSHAKE and (self._reauth_started_ms is None
                                                 or now - self._reauth_started_ms >= MIN_REAUTH_INTERVAL_MS):
            self._reauth_started_ms = now
            assert self.server is not None
            self._previous = (self.server.mechanism, self.principal)
            return self._handshake(bytes(frame))
        if now > self.session_end_ms:
            log.info("Disconnecting expired channel %s (its session ended %d ms ago, not re-authenticated)",
                     self.who, now - self.session_end_ms)
            self._move(Event.SESSION_EXPIRED)  # not in the table: FAILED
            return CLOSE
        self._move(Event.SESSION_REQUEST)
        return DISPATCH

    def _decode(self, frame: bytes) -> tuple[int, int, dict[str, object]] | None:
        try:
            request = decode_request(frame)
        except DecodeError as exc:
            log.info("Failed authentication with %s (cannot parse %s: %s)", self.who,
                     _name(unpack_request_prefix(frame, 0)[0]), exc)
            self.state = SaslState.FAILED
            return None
        return request.api_version, request.correlation_id, dict(request.body)

    def _out_of_place(self, frame: bytes, api_key: int) -> Step:
        """A request other than SaslAuthenticate after a v1 handshake: Kafka parses it, answers it
        with the request's own error response (ILLEGAL_SASL_STATE), and closes."""
        log.info("Failed authentication with %s (Unexpected Kafka request of type %s during SASL "
                 "authentication.)", self.who, _name(api_key))
        decoded = self._decode(frame)
        self._move(Event.OTHER_REQUEST)  # not in the table: FAILED
        if decoded is None:
            return CLOSE
        version, correlation_id, body = decoded
        try:
            answer = error_answer(api_key, version, body, ErrorCode.ILLEGAL_SASL_STATE)
        except ValueError:  # nowhere to carry the code (Metadata naming no topic): Kafka's answer is empty
            answer = fit_body(api_key, "response", version, {})
        return Step(response=encode_response(api_key, version, correlation_id, answer), close=True)

    def _handshake(self, frame: bytes) -> Step:
        decoded = self._decode(frame)
        if decoded is None:
            return CLOSE
        version, correlation_id, body = decoded
        mechanism = str(body.get("mechanism") or "")
        enabled = list(self.settings.mechanisms)
        if mechanism in enabled:
            self.server = self.settings.server(mechanism, self.scram_credentials, self._now_ms)
            if self._previous is not None and mechanism != self._previous[0]:
                self._move(Event.MECHANISM_CHANGED)
            else:
                self._move(Event.HANDSHAKE_V0 if version == 0 else Event.HANDSHAKE_V1)
            error = ErrorCode.NONE
        else:
            self._move(Event.MECHANISM_REFUSED)
            log.info("Failed authentication with %s (Unsupported SASL mechanism %s)", self.who, mechanism)
            error = ErrorCode.UNSUPPORTED_SASL_MECHANISM
        response = encode_response(ApiKey.SASL_HANDSHAKE, version, correlation_id,
                                   {"error_code": error, "mechanisms": enabled})
        return Step(response=response, close=self.state is SaslState.FAILED)

    def _evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        """The challenge and, if the token was refused, the message the client is told."""
        assert self.server is not None
        try:
            challenge = self.server.evaluate(token)
            if self.server.complete and self._previous is not None and self.principal != self._previous[1]:
                old, new = (p.replace(":", ".", 1) for p in (self._previous[1], self.principal))
                raise AuthenticationFailed(
                    f"Cannot change principals during re-authentication from {old}: {new}")
        except AuthenticationFailed as exc:
            message = exc.message or "Authentication failed"
            log.info("Failed authentication with %s (%s)", self.who, message)
            self._move(Event.TOKEN_REFUSED)
            return b"", message
        except MalformedResponse as exc:
            log.info("Failed authentication with %s (%s)", self.who, exc.reason)
            self._move(Event.TOKEN_REFUSED)
            # Kafka's message for a SaslException: the reason stays in the broker's log.
            return b"", (f"Authentication failed during {self._during} due to invalid credentials with "
                         f"SASL mechanism {self.server.mechanism}")
        self._move(Event.TOKEN_ACCEPTED if self.server.complete else Event.TOKEN_CHALLENGED)
        if self.server.complete:
            self._start_session()
        return challenge, None

    def _start_session(self) -> None:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the session's end, the sooner of
        the credential's expiry and connections.max.reauth.ms (if above 0), and the lifetime the
        client is told (0: no end)."""
        assert self.server is not None
        now = self._now_ms()
        expiry = self.server.credential_expiry_ms
        max_reauth = self.settings.max_reauth_ms.get(self.server.mechanism, 0)
        limits = ([] if expiry is None else [expiry - now]) + ([max_reauth] if max_reauth > 0 else [])
        self.authentications += 1
        self._previous = None
        self.session_lifetime_ms = max(0, min(limits)) if limits else 0
        self.session_end_ms = now + self.session_lifetime_ms if limits else None

    def _authenticate(self, frame: bytes) -> Step:
        decoded = self._decode(frame)
        if decoded is None:
            return CLOSE
        version, correlation_id, body = decoded
        token = body.get("auth_bytes")
        challenge, refusal = self._evaluate(bytes(token) if isinstance(token, (bytes, bytearray)) else b"")
        lifetime = self.session_lifetime_ms if self.complete else 0
        answer = {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED if refusal else ErrorCode.NONE,
                  "error_message": refusal, "auth_bytes": challenge, "session_lifetime_ms": lifetime}
        response = encode_response(ApiKey.SASL_AUTHENTICATE, version, correlation_id,
                                   fit_body(ApiKey.SASL_AUTHENTICATE, "response", version, answer))
        return Step(response=response, close=self.state is SaslState.FAILED)

    def _raw_token(self, frame: bytes) -> Step:
        challenge, refusal = self._evaluate(frame)
        if refusal is not None:
            return CLOSE  # a bare token has no room for an error: the client sees the close
        return Step(response=challenge)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return api_name(api_key)
