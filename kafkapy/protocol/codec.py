"""The public sans-I/O codec: frames (without their 4-byte size prefix) to and from values.

Headers are decoded with the same compiled schemas as bodies, from Kafka's own
RequestHeader/ResponseHeader specs at the header version that
:mod:`kafkapy.protocol.catalogue` picks for the API and version.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, NoReturn

import attrs

from kafkapy.errors import DecodeError, EncodeError, ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import get_api, request_header_version, response_header_version
from kafkapy.protocol.header import RequestHeader, header_schema, peek_request_header
from kafkapy.protocol.json_decoder import JsonDecoder, RenderedBody, compile_json_decoder
from kafkapy.protocol.produce_response import FAST_VERSIONS, fast_response_encoder
from kafkapy.protocol.schema import Body, MessageSchema

__all__ = [
    "RenderedRequest",
    "RenderedResponse",
    "Request",
    "RequestHeader",
    "Response",
    "UnknownApiError",
    "UnsupportedVersionError",
    "body_fitter",
    "decode_request",
    "decode_request_header",
    "decode_request_json",
    "decode_response",
    "decode_response_json",
    "encode_request",
    "encode_response",
    "encode_response_body",
    "fit_body",
    "json_body_decoder",
    "message_schema",
    "request_decoder",
    "request_json_decoder",
    "response_encoder",
    "response_header",
    "response_json_decoder",
]

#: ``message_schema``'s key for the request or response header itself: no API has key -1.
HEADER_SCHEMA_KEY = -1

Decoder = Callable[[bytes, int, int], tuple[Body, int]]
Encoder = Callable[[Mapping[str, Any], bytearray], None]


class UnknownApiError(DecodeError):
    """An API key no spec in the catalogue defines."""


class UnsupportedVersionError(DecodeError):
    """A known API at a version outside what the catalogue can decode."""


class Request(NamedTuple):
    """A decoded request. ``trailing_bytes`` counts bytes after a complete body:
    Java Kafka ignores them and real clients send some (librdkafka's Metadata v13
    request carries 3), so they are accepted but kept visible.

    A named tuple, immutable like the rest: a broker builds one per request, and a tuple is the
    cheapest immutable object Python makes."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Body
    trailing_bytes: int = 0
    header_version: int = 1


class Response(NamedTuple):
    """A decoded response; ``api_version`` is the version its body was read at,
    which differs from the request's for ApiVersions' v0 error fallback. A named tuple, as
    :class:`Request`: readers of captures and clients build one per response."""

    api_key: int
    api_version: int
    correlation_id: int
    body: Body
    trailing_bytes: int = 0


class RenderedRequest(NamedTuple):
    """A request whose body was decoded straight to JSON (see :mod:`kafkapy.protocol.json_decoder`):
    the fields of :class:`Request`, with a RenderedBody for the Body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: RenderedBody
    trailing_bytes: int = 0
    header_version: int = 1


class RenderedResponse(NamedTuple):
    """A response whose body was decoded straight to JSON: :class:`Response` with a RenderedBody."""

    api_key: int
    api_version: int
    correlation_id: int
    body: RenderedBody
    trailing_bytes: int = 0


_schemas: dict[tuple[int, str, int], MessageSchema] = {}


def message_schema(api_key: int, kind: str, version: int) -> MessageSchema:
    """The cached construct schema of one API's request or response at one version.

    ``api_key`` HEADER_SCHEMA_KEY (-1) selects the request or response header, at header version
    ``version``.
    """
    key = (api_key, kind, version)
    schema = _schemas.get(key)
    if schema is not None:
        return schema
    if api_key == HEADER_SCHEMA_KEY:
        schema = header_schema(kind, version)
    else:
        api = get_api(api_key)
        if api is None:
            raise UnknownApiError(f"unknown API key {api_key}", api_key=api_key)
        if version not in api.versions:
            raise UnsupportedVersionError(
                f"{api.name} v{version} is outside the versions kafkapy knows ({api.versions})",
                api_key=api_key, api_version=version)
        schema = MessageSchema(api.request if kind == "request" else api.response, version)
    _schemas[key] = schema
    return schema


def _codec(api_key: int, kind: str, version: int) -> tuple[Decoder, Encoder]:
    return message_schema(api_key, kind, version).compiled_codec()


_json_decoders: dict[tuple[int, str, int, bool], JsonDecoder] = {}


def json_body_decoder(api_key: int, kind: str, version: int, decode_records: bool = True) -> JsonDecoder:
    """The generated JSON decoder of one message body at one version, compiled on first use and
    cached: ``(buf, pos, end)`` to ``(RenderedBody, pos)``. ``decode_records``: records fields as
    lists of records (else base64 of their raw bytes)."""
    key = (api_key, kind, version, decode_records)
    found = _json_decoders.get(key)
    if found is None:
        root = message_schema(api_key, kind, version).root
        found = _json_decoders[key] = compile_json_decoder(root, decode_records, errors=kind == "response")
    return found


def _view(data: bytes | bytearray | memoryview) -> bytes:
    """Decoders run on bytes: indexing, unpack_from and str() are all faster on bytes than on
    memoryviews, and copying one frame costs far less than that difference."""
    if isinstance(data, bytes):
        return data
    return bytes(data)


def _run_decoder(decode: Callable[[bytes, int, int], tuple[Any, int]], buf: bytes, pos: int, end: int,
                 api_key: int, api_version: int) -> tuple[Any, int]:
    try:
        return decode(buf, pos, end)
    except Exception as exc:
        _decoder_failed(exc, api_key, api_version)


def _decoder_failed(exc: Exception, api_key: int, api_version: int) -> NoReturn:
    """Raise what a body decoder raised as the project's error, naming the API and version."""
    if isinstance(exc, DecodeError):
        if exc.api_key is None:
            exc.api_key, exc.api_version = api_key, api_version
        raise exc
    # a decoder bug must still surface as the project's error
    raise DecodeError(f"internal decoder error: {exc!r}", api_key=api_key, api_version=api_version) from exc


#: Read a request's header only; works for API keys the catalogue does not know. This is the peek
#: (see :mod:`kafkapy.protocol.header`), which a test holds equal to the RequestHeader schema.
decode_request_header = peek_request_header


@attrs.frozen
class _Plan:
    """Everything one (API, version, direction) needs, looked up once: the hot path is one dict get."""

    header_version: int
    decode_header: Decoder
    decode_body: Decoder
    encode_body: Encoder


_request_plans: dict[tuple[int, int], _Plan] = {}
_response_plans: dict[tuple[int, int], _Plan] = {}


def _request_plan(api_key: int, api_version: int) -> _Plan:
    plan = _request_plans.get((api_key, api_version))
    if plan is None:
        decode_body, encode_body = _codec(api_key, "request", api_version)  # refuses unknown keys first
        header_version = request_header_version(api_key, api_version)
        decode_header = _codec(HEADER_SCHEMA_KEY, "request", header_version)[0]
        plan = _Plan(header_version, decode_header, decode_body, encode_body)
        _request_plans[(api_key, api_version)] = plan
    return plan


def _response_plan(api_key: int, api_version: int) -> _Plan:
    plan = _response_plans.get((api_key, api_version))
    if plan is None:
        decode_body, encode_body = _codec(api_key, "response", api_version)
        header_version = response_header_version(api_key, api_version)
        decode_header = _codec(HEADER_SCHEMA_KEY, "response", header_version)[0]
        plan = _Plan(header_version, decode_header, decode_body, encode_body)
        _response_plans[(api_key, api_version)] = plan
    return plan


_KEY_VERSION = struct.Struct(">hh")
_CORRELATION = struct.Struct(">i")
RequestDecoder = Callable[[bytes], Request]
_request_decoders: dict[tuple[int, int], RequestDecoder] = {}
_new_request = tuple.__new__


def request_decoder(api_key: int, api_version: int) -> RequestDecoder:
    """The decoder of whole request frames of one API and version, made once and cached.

    The header is read by :func:`~kafkapy.protocol.header.peek_request_header`. The decoder expects
    a frame of this API and version, as ``decode_request`` or a broker's routing table hands it.
    Unknown keys and versions raise here, when the decoder is asked for."""
    key = (api_key, api_version)
    found = _request_decoders.get(key)
    if found is not None:
        return found
    plan = _request_plans.get(key) or _request_plan(api_key, api_version)
    decode = _request_decoders[key] = _frame_decoder(api_key, api_version, plan.decode_body, Request)
    return decode


def _frame_decoder(api_key: int, api_version: int, decode_body: Callable[[bytes, int, int], tuple[Any, int]],
                   cls: type[Any]) -> Callable[[bytes], Any]:
    """A request frame's header read by the peek, its body by ``decode_body``, both into a
    ``cls`` named tuple."""
    plan = _request_plans.get((api_key, api_version)) or _request_plan(api_key, api_version)
    header_version = plan.header_version
    peek = peek_request_header

    def decode(buf: bytes) -> Any:
        _, _, correlation_id, client_id, _, pos = peek(buf)
        end = len(buf)
        try:  # _run_decoder, inline: a call less per frame
            body, stop = decode_body(buf, pos, end)
        except Exception as exc:
            _decoder_failed(exc, api_key, api_version)
        return _new_request(cls, (api_key, api_version, correlation_id, client_id, body, end - stop,
                                  header_version))

    return decode


def decode_request(data: bytes | bytearray | memoryview) -> Request:
    """Decode one request frame (without its size prefix)."""
    buf = _view(data)
    if len(buf) < 8:
        raise DecodeError(f"request header needs at least 8 bytes, got {len(buf)}", offset=0, truncated=True)
    key = _KEY_VERSION.unpack_from(buf, 0)
    try:
        # Unknown keys and versions are reported as such, before their header is attempted.
        decode = _request_decoders.get(key) or request_decoder(*key)
    except DecodeError as exc:
        _hint_size_prefix(exc, buf)
        raise
    return decode(buf)


def _hint_size_prefix(exc: DecodeError, buf: bytes) -> None:
    """Add to the error of a request's unknown API key or version that the bytes open with their
    own 4-byte size prefix, when they do: frames are decoded without it, and given with it (a
    proxy's first try) the size reads as Produce (key 0, or higher for a frame over 64 KiB) at a
    version equal to the size's low half, which says nothing of the real mistake."""
    if len(buf) >= 4 and int.from_bytes(buf[:4], "big") == len(buf) - 4:
        exc.reason += (f"; the bytes open with their own size prefix ({len(buf) - 4}): "
                       "decode the frame without its first 4 bytes")
        exc.args = (exc.reason,)


RenderedRequestDecoder = Callable[[bytes], RenderedRequest]
_rendered_request_decoders: dict[tuple[int, int, bool], RenderedRequestDecoder] = {}


def rendered_request_decoder(
    api_key: int, api_version: int, decode_records: bool = True
) -> RenderedRequestDecoder:
    """:func:`request_decoder` with the body decoded straight to JSON (:func:`json_body_decoder`)."""
    key = (api_key, api_version, decode_records)
    found = _rendered_request_decoders.get(key)
    if found is None:
        _request_plans.get(key[:2]) or _request_plan(api_key, api_version)  # refuses unknown keys first
        body = json_body_decoder(api_key, "request", api_version, decode_records)
        found = _rendered_request_decoders[key] = _frame_decoder(api_key, api_version, body, RenderedRequest)
    return found


def decode_request_json(
    data: bytes | bytearray | memoryview, *, decode_records: bool = True
) -> RenderedRequest:
    """:func:`decode_request` for readers that want the body as JSON only: no Body is built. The
    text equals the capture rows' JSON of the Body, and bad input raises the same DecodeError."""
    buf = _view(data)
    if len(buf) < 8:
        raise DecodeError(f"request header needs at least 8 bytes, got {len(buf)}", offset=0, truncated=True)
    api_key, api_version = _KEY_VERSION.unpack_from(buf, 0)
    try:
        decode = _rendered_request_decoders.get((api_key, api_version, decode_records)) or \
            rendered_request_decoder(api_key, api_version, decode_records)
    except DecodeError as exc:
        _hint_size_prefix(exc, buf)
        raise
    return decode(buf)


def request_json_decoder(
    decode_records: bool = True,
) -> Callable[[bytes | bytearray | memoryview], RenderedRequest]:
    """:func:`decode_request_json` with ``decode_records`` bound, for readers of many frames (the
    capture rows): each API and version's frame decoder is found by the frame's first four bytes
    in one dict, and called directly."""
    decoders: dict[bytes, RenderedRequestDecoder] = {}

    def decode(data: bytes | bytearray | memoryview) -> RenderedRequest:
        buf = data if type(data) is bytes else _view(data)
        found = decoders.get(buf[:4])
        if found is None or len(buf) < 8:
            if len(buf) < 8:
                raise DecodeError(f"request header needs at least 8 bytes, got {len(buf)}", offset=0,
                                  truncated=True)
            # unknown keys and versions raise here, every time, and are never kept
            api_key, api_version = _KEY_VERSION.unpack_from(buf, 0)
            try:
                found = decoders[buf[:4]] = rendered_request_decoder(api_key, api_version, decode_records)
            except DecodeError as exc:
                _hint_size_prefix(exc, buf)
                raise
        return found(buf)

    return decode


def response_json_decoder(
    decode_records: bool = True,
) -> Callable[[bytes | bytearray | memoryview, int, int], RenderedResponse]:
    """:func:`decode_response_json` with ``decode_records`` bound, as :func:`request_json_decoder`."""
    decoders: dict[tuple[int, int], RenderedResponseDecoder] = {}

    def decode(data: bytes | bytearray | memoryview, api_key: int, api_version: int) -> RenderedResponse:
        found = decoders.get((api_key, api_version))
        if found is None:
            found = _rendered_response_decoders.get((api_key, api_version, decode_records)) or \
                _rendered_response_decoder(api_key, api_version, decode_records)
            if found is None:  # outside the catalogue: the general path names the error
                return decode_response_json(data, api_key, api_version, decode_records=decode_records)
            decoders[(api_key, api_version)] = found
        return found(data if type(data) is bytes else _view(data))

    return decode


def decode_response(data: bytes | bytearray | memoryview, api_key: int, api_version: int) -> Response:
    """Decode one response frame; the API key and version come from the matching request."""
    decode = _response_decoders.get((api_key, api_version)) or response_decoder(api_key, api_version)
    if decode is None:  # an API or version outside the catalogue: the general path names the error
        return _decode_response(data, api_key, api_version, _body_decoder, Response)  # type: ignore[no-any-return]
    return decode(data if type(data) is bytes else _view(data))


ResponseDecoder = Callable[[bytes], Response]
BodyDecoder = Callable[[bytes, int, int], tuple[Any, int]]
_response_decoders: dict[tuple[int, int], ResponseDecoder] = {}


def response_decoder(api_key: int, api_version: int) -> ResponseDecoder | None:
    """The decoder of whole response frames of one API and version, made once and cached: what
    :func:`decode_response` does, with the common header read by hand. None for APIs and versions
    outside the catalogue."""
    found = _response_decoders.get((api_key, api_version))
    if found is None:
        try:
            plan = _response_plans.get((api_key, api_version)) or _response_plan(api_key, api_version)
        except DecodeError:
            return None
        found = _response_decoders[(api_key, api_version)] = _response_frame_decoder(
            api_key, api_version, plan.decode_body, _body_decoder, Response)
    return found


def decode_response_json(data: bytes | bytearray | memoryview, api_key: int, api_version: int, *,
                         decode_records: bool = True) -> RenderedResponse:
    """:func:`decode_response` with the body decoded straight to JSON, as :func:`decode_request_json`."""
    buf = _view(data)
    decode = _rendered_response_decoders.get((api_key, api_version, decode_records)) or \
        _rendered_response_decoder(api_key, api_version, decode_records)
    if decode is None:  # an API or version outside the catalogue: the general path names the error
        decoders = _json_body if decode_records else _raw_json_body
        return _decode_response(buf, api_key, api_version, decoders, RenderedResponse)  # type: ignore[no-any-return]
    return decode(buf)


RenderedResponseDecoder = Callable[[bytes], RenderedResponse]
_rendered_response_decoders: dict[tuple[int, int, bool], RenderedResponseDecoder] = {}
_new_response = tuple.__new__


def _rendered_response_decoder(api_key: int, api_version: int,
                               decode_records: bool) -> RenderedResponseDecoder | None:
    """decode_response_json for one API and version, made once and cached. None for APIs and
    versions outside the catalogue."""
    key = (api_key, api_version, decode_records)
    try:
        _response_plans.get(key[:2]) or _response_plan(api_key, api_version)
        decode_body = json_body_decoder(api_key, "response", api_version, decode_records)
    except DecodeError:
        return None
    decode = _rendered_response_decoders[key] = _response_frame_decoder(
        api_key, api_version, decode_body, _json_body if decode_records else _raw_json_body, RenderedResponse)
    return decode


def _response_frame_decoder(api_key: int, api_version: int, decode_body: BodyDecoder,
                            general: Callable[[int, int], BodyDecoder],
                            cls: type[Any]) -> Callable[[bytes], Any]:
    """A response frame's common header (a correlation id, then in header v1 an empty tag
    section) read by hand and its body by ``decode_body``, into a ``cls`` named tuple. Anything
    else (tags in the header, a short frame, ApiVersions' v0 error fallback) goes through the
    general path with ``general``'s body decoders, which decides or names the error."""
    header_version = response_header_version(api_key, api_version)
    unpack_correlation = _CORRELATION.unpack_from
    may_fall_back = api_key == ApiKey.API_VERSIONS and api_version > 0
    unpack_error = struct.Struct(">h").unpack_from
    unsupported_version = ErrorCode.UNSUPPORTED_VERSION

    def decode(buf: bytes) -> Any:
        end = len(buf)
        pos = 4 + header_version
        if end < pos or (header_version and buf[4] != 0) or \
                (may_fall_back and end >= pos + 2 and unpack_error(buf, pos)[0] == unsupported_version):
            return _decode_response(buf, api_key, api_version, general, cls)
        try:  # as in _frame_decoder
            body, stop = decode_body(buf, pos, end)
        except Exception as exc:
            _decoder_failed(exc, api_key, api_version)
        return _new_response(cls, (api_key, api_version, unpack_correlation(buf, 0)[0], body, end - stop))

    return decode


def _body_decoder(api_key: int, version: int) -> Decoder:
    return _codec(api_key, "response", version)[0]


def _json_body(api_key: int, version: int) -> JsonDecoder:
    return json_body_decoder(api_key, "response", version, True)


def _raw_json_body(api_key: int, version: int) -> JsonDecoder:
    return json_body_decoder(api_key, "response", version, False)


def _decode_response(data: bytes | bytearray | memoryview, api_key: int, api_version: int,
                     body_decoder: Callable[[int, int], Callable[[bytes, int, int], tuple[Any, int]]],
                     cls: Callable[..., Any]) -> Any:
    buf = _view(data)
    header_version = response_header_version(api_key, api_version)
    decode_header, _ = _codec(HEADER_SCHEMA_KEY, "response", header_version)
    header, pos = _run_decoder(decode_header, buf, 0, len(buf), api_key, api_version)
    version = api_version
    if api_key == ApiKey.API_VERSIONS and api_version > 0 and len(buf) >= pos + 2 and \
            struct.unpack_from(">h", buf, pos)[0] == ErrorCode.UNSUPPORTED_VERSION:
        version = 0  # a broker that cannot parse the request's version answers with a v0 body
    decode = body_decoder(api_key, version)
    body, end = _run_decoder(decode, buf, pos, len(buf), api_key, version)
    return cls(api_key, version, header["correlation_id"], body, len(buf) - end)


def _run_encoder(api_key: int, kind: str, version: int, body: Mapping[str, Any], out: bytearray) -> None:
    schema = message_schema(api_key, kind, version)
    _, encode = schema.compiled_codec()
    mark = len(out)
    try:
        encode(body, out)
    except EncodeError:
        raise
    except Exception as exc:
        # Re-run the interpreted path: it checks field by field and names the culprit.
        del out[mark:]
        schema.root.write(body, bytearray())
        raise EncodeError(f"cannot encode {schema.spec.name} v{version}: {exc!r}") from exc


Fitter = Callable[[Mapping[str, Any]], Body]
_fitters: dict[tuple[int, str, int], Fitter] = {}


def body_fitter(api_key: int, kind: str, version: int) -> Fitter:
    """The compiled ``fit_body`` of one message and version, for callers that fit many bodies."""
    key = (api_key, kind, version)
    fit = _fitters.get(key)
    if fit is None:
        fit = _fitters[key] = message_schema(api_key, kind, version).compiled_fit()
    return fit


def fit_body(api_key: int, kind: str, version: int, body: Mapping[str, Any]) -> Body:
    """Drop the fields ``version`` lacks, so a handler can write one body for all versions.
    Generated code (``MessageSchema.compiled_fit``), equal to ``StructCodec.fit``."""
    fit = _fitters.get((api_key, kind, version)) or body_fitter(api_key, kind, version)
    return fit(body)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: Mapping[str, Any]) -> bytes:
    """Encode one request frame (without its size prefix). Missing fields take their defaults."""
    message_schema(api_key, "request", api_version)  # refuses unknown keys and versions first
    out = bytearray()
    header_version = request_header_version(api_key, api_version)
    header: dict[str, Any] = {"request_api_key": api_key, "request_api_version": api_version,
                              "correlation_id": correlation_id}
    if header_version >= 1:  # header v0 (ControlledShutdown v0) has no client id
        header["client_id"] = client_id
    _run_encoder(HEADER_SCHEMA_KEY, "request", header_version, header, out)
    _run_encoder(api_key, "request", api_version, body, out)
    return bytes(out)


def response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """The response header alone: the correlation id, plus an empty tag section from header v1 on."""
    plan = _response_plans.get((api_key, api_version)) or _response_plan(api_key, api_version)
    header = _CORRELATION.pack(correlation_id)
    return header + b"\x00" if plan.header_version >= 1 else header


def encode_response_body(api_key: int, api_version: int, body: Mapping[str, Any]) -> bytes:
    """A response body without header, for responses a broker sends many times unchanged."""
    out = bytearray()
    _run_encoder(api_key, "response", api_version, body, out)
    return bytes(out)


ResponseEncoder = Callable[[int, Mapping[str, Any]], bytes]
_response_encoders: dict[tuple[int, int], ResponseEncoder] = {}


def response_encoder(api_key: int, api_version: int) -> ResponseEncoder:
    """``encode_response`` for one API and version, made once and cached: (correlation id, body)
    to a response frame, with nothing left to look up per response."""
    key = (api_key, api_version)
    found = _response_encoders.get(key)
    if found is not None:
        return found
    plan = _response_plans.get(key) or _response_plan(api_key, api_version)
    encode_body, pack = plan.encode_body, _CORRELATION.pack
    tag = b"\x00" if plan.header_version >= 1 else b""  # an empty tag section from header v1 on

    def encode(correlation_id: int, body: Mapping[str, Any]) -> bytes:
        out = bytearray(pack(correlation_id))
        out += tag
        try:
            encode_body(body, out)
        except EncodeError:
            raise
        except Exception:
            _run_encoder(api_key, "response", api_version, body, bytearray())  # names the field
            raise
        return bytes(out)

    found = encode
    if api_key == ApiKey.PRODUCE and api_version in FAST_VERSIONS:  # the hot path, by hand
        found = fast_response_encoder(api_version, encode)
    _response_encoders[key] = found
    return found


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """Encode one response frame (without its size prefix)."""
    return response_encoder(api_key, api_version)(correlation_id, body)
