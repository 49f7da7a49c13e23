"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator runs it (sans-I/O).

Theory of operation
-------------------
A connection on a SASL listener starts unauthenticated; every frame it sends goes through
``Authenticator.receive`` until the state is COMPLETE, and from then on straight to the dispatcher.
Each frame is classified into an Event, TRANSITIONS gives the next state, and anything the table
does not list is FAILED: the connection closes (after the answer, if the event has one). As in Kafka:

* ApiVersions is served once, before the handshake (the dispatcher answers it: ``Step.dispatch``);
  one at a version the broker does not serve is answered (UNSUPPORTED_VERSION, by the dispatcher)
  and the client may try again.
* SaslHandshake names the mechanism. An enabled one is accepted with the enabled list; any other
  gets UNSUPPORTED_SASL_MECHANISM with the list, and the connection closes. Handshake v1 means the
  tokens come in SaslAuthenticate requests; v0 means they come as bare size-prefixed frames with
  no Kafka header, and so do the challenges (KIP-152 added v1; v0 is what 0.10 clients sent).
* A token the mechanism refuses gets SASL_AUTHENTICATION_FAILED with the mechanism's message
  (bare tokens cannot carry one: the connection just closes), one log line, and the connection
  closes. A token the mechanism cannot parse gets Kafka's generic message instead.
* Any other request before COMPLETE is "Unexpected Kafka request of type X during SASL handshake"
  (or authentication) in the log, and the connection closes with no answer.

session_lifetime_ms is 0: no re-authentication (KIP-368) is asked for.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

import attrs

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol import api_name, decode_request, encode_response, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.header import REQUEST_PREFIX_SIZE, unpack_request_prefix
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
    FAILED = "FAILED"  # the connection closes


class Event(enum.Enum):
    API_VERSIONS = "ApiVersions"
    API_VERSIONS_UNSERVED = "ApiVersions at a version not served"
    HANDSHAKE_V0 = "SaslHandshake v0, mechanism enabled"
    HANDSHAKE_V1 = "SaslHandshake v1, mechanism enabled"
    MECHANISM_REFUSED = "SaslHandshake, mechanism not enabled"
    AUTHENTICATE = "SaslAuthenticate"
    RAW_TOKEN = "a bare token"
    TOKEN_CHALLENGED = "token accepted, more to come"  # (SCRAM's first message)
    TOKEN_ACCEPTED = "token accepted, exchange complete"
    TOKEN_REFUSED = "token refused"
    OTHER_REQUEST = "any other request"


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
}
# The states in which a Kafka request is read as SaslHandshake-or-ApiVersions, for the log's wording.
_HANDSHAKING = (S.HANDSHAKE_OR_VERSIONS, S.HANDSHAKE)


@attrs.frozen
class Step:
    """What the connection does with one frame: hand it to the dispatcher, or write ``response``
    (a frame body, no size prefix) if any; then close if ``close``."""

    dispatch: bool = False
    response: bytes | None = None
    close: bool = False


DISPATCH = Step(dispatch=True)
CLOSE = Step(close=True)


class Authenticator:
    """The SASL state of one connection. ``api_versions_served(version)`` says whether the
    dispatcher serves ApiVersions at that version (it answers the request either way);
    ``scram_credentials(mechanism, user)`` gives SCRAM's stored credentials."""

    def __init__(self, settings: SaslSettings, who: str, api_versions_served: Callable[[int], bool],
                 scram_credentials: CredentialLookup = lambda mechanism, user: None) -> None:
        self.settings = settings
        self.scram_credentials = scram_credentials
        self.who = who  # the connection, for the log
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.server: SaslServer | None = None
        self._api_versions_served = api_versions_served

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def principal(self) -> str:
        """Kafka's default principal for a SASL connection: User:<authorization id>."""
        assert self.server is not None and self.server.complete
        return f"User:{self.server.authorization_id}"

    def _move(self, event: Event) -> SaslState:
        self.state = TRANSITIONS.get((self.state, event), SaslState.FAILED)
        return self.state

    def receive(self, frame: bytes) -> Step:
        """The next frame the client sent (without its size prefix)."""
        if self.state is SaslState.COMPLETE:
            return DISPATCH
        if self.state is SaslState.RAW_TOKEN:
            return self._raw_token(frame)
        if len(frame) < REQUEST_PREFIX_SIZE:
            log.info("Failed authentication with %s (a %d-byte frame is no Kafka request)", self.who,
                     len(frame))
            self.state = SaslState.FAILED
            return CLOSE
        api_key, api_version, _ = unpack_request_prefix(frame, 0)
        during = "handshake" if self.state in _HANDSHAKING else "authentication"
        if api_key == ApiKey.API_VERSIONS:
            served = self._api_versions_served(api_version)
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

    def _decode(self, frame: bytes) -> tuple[int, int, dict[str, object]] | None:
        try:
            request = decode_request(frame)
        except DecodeError as exc:
            log.info("Failed authentication with %s (cannot parse %s: %s)", self.who,
                     _name(unpack_request_prefix(frame, 0)[0]), exc)
            self.state = SaslState.FAILED
            return None
        return request.api_version, request.correlation_id, dict(request.body)

    def _handshake(self, frame: bytes) -> Step:
        decoded = self._decode(frame)
        if decoded is None:
            return CLOSE
        version, correlation_id, body = decoded
        mechanism = str(body.get("mechanism") or "")
        enabled = list(self.settings.mechanisms)
        if mechanism in enabled:
            self.server = self.settings.server(mechanism, self.scram_credentials)
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
        except AuthenticationFailed as exc:
            message = exc.message or "Authentication failed"
            log.info("Failed authentication with %s (%s)", self.who, message)
            self._move(Event.TOKEN_REFUSED)
            return b"", message
        except MalformedResponse as exc:
            log.info("Failed authentication with %s (%s)", self.who, exc.reason)
            self._move(Event.TOKEN_REFUSED)
            # Kafka's message for a SaslException: the reason stays in the broker's log.
            return b"", ("Authentication failed during authentication due to invalid credentials with "
                         f"SASL mechanism {self.server.mechanism}")
        self._move(Event.TOKEN_ACCEPTED if self.server.complete else Event.TOKEN_CHALLENGED)
        return challenge, None

    def _authenticate(self, frame: bytes) -> Step:
        decoded = self._decode(frame)
        if decoded is None:
            return CLOSE
        version, correlation_id, body = decoded
        token = body.get("auth_bytes")
        challenge, refusal = self._evaluate(bytes(token) if isinstance(token, (bytes, bytearray)) else b"")
        answer = {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED if refusal else ErrorCode.NONE,
                  "error_message": refusal, "auth_bytes": challenge, "session_lifetime_ms": 0}
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
