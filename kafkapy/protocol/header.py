"""The request header, read in one place: the codec, the broker's dispatch, capture framing and
pairing all learn a request's key, version, correlation id and client id here.

Every request header starts with the same 8 bytes (api_key int16, api_version int16,
correlation_id int32); v1 and v2 add the client id (a nullable int16-length string, not compact
even in v2), and v2 a tagged-field section. Which version a request uses is the catalogue's rule
(:func:`kafkapy.protocol.catalogue.request_header_version`), looked up once per key and version.

Two readers, one answer:

* :func:`peek_request_header` reads the common case by hand (a client id, then in v2 an empty tag
  section) and hands everything else (tags in the header, a cut header, a bad length) to the
  compiled RequestHeader schema, which reads every case and names the error. A test holds it equal
  to :func:`decode_request_header_plain`, the schema alone, on any bytes. It is the codec's
  ``decode_request_header``.
* :data:`unpack_request_prefix` is the 8-byte prefix and nothing else: exactly one struct unpack,
  for a hot path (dispatch's routing) that needs no client id and has checked the frame holds
  :data:`REQUEST_PREFIX_SIZE` bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from kafkapy.errors import DecodeError
from kafkapy.protocol.catalogue import request_header_version
from kafkapy.protocol.schema import MessageSchema
from kafkapy.protocol.specs import MessageSpec, standard_and_project_specs
from kafkapy.protocol.strings import JAVA_REPLACE

__all__ = [
    "REQUEST_PREFIX_SIZE",
    "RequestHeader",
    "decode_request_header_plain",
    "header_schema",
    "peek_request_header",
    "unpack_request_prefix",
]

_PREFIX = struct.Struct(">hhi")
# The prefix plus the client id's int16 length: request header v1 and v2 alike
_PREFIX_AND_CLIENT_ID_LENGTH = struct.Struct(">hhih")

#: Bytes every request header version begins with: api_key, api_version, correlation_id.
REQUEST_PREFIX_SIZE = _PREFIX.size

#: ``(buffer, offset=0) -> (api_key, api_version, correlation_id)``: one struct unpack, no more.
#: The caller guarantees :data:`REQUEST_PREFIX_SIZE` bytes (a shorter buffer raises struct.error);
#: everything else should call :func:`peek_request_header`.
unpack_request_prefix: Callable[..., tuple[int, int, int]] = _PREFIX.unpack_from


class RequestHeader(NamedTuple):
    """A request's header. A named tuple like Request: capture decoding makes one per request."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    header_size: int  # bytes the header took; the body starts here


_schemas: dict[tuple[str, int], MessageSchema] = {}


def _header_spec(kind: str) -> MessageSpec:
    name = "RequestHeader" if kind == "request" else "ResponseHeader"
    for spec in standard_and_project_specs():
        if spec.name == name:
            return spec
    raise RuntimeError(f"no {name} spec in the catalogue")


def header_schema(kind: str, version: int) -> MessageSchema:
    """The cached schema of Kafka's RequestHeader or ResponseHeader spec at one header version
    (flexible from request header v2 and response header v1, as the specs' flexibleVersions say)."""
    key = (kind, version)
    schema = _schemas.get(key)
    if schema is None:
        flexible = version >= (2 if kind == "request" else 1)
        schema = _schemas[key] = MessageSchema(_header_spec(kind), version, flexible=flexible)
    return schema


# api_key * 65536 + api_version (both int16, so the int is unique) -> request header version.
# Real traffic uses a few dozen pairs; the bound keeps garbage (a capture's damaged frames) from
# growing it without end.
_header_versions: dict[int, int] = {}
_HEADER_VERSIONS_KEPT = 4096


def _header_version(api_key: int, api_version: int) -> int:
    if len(_header_versions) >= _HEADER_VERSIONS_KEPT:
        _header_versions.clear()
    version = _header_versions[api_key * 65536 + api_version] = request_header_version(api_key, api_version)
    return version


def _too_short(end: int) -> DecodeError:
    return DecodeError(f"request header needs at least {REQUEST_PREFIX_SIZE} bytes, got {end}",
                       offset=0, truncated=True)


def decode_request_header_plain(data: bytes | bytearray | memoryview) -> RequestHeader:
    """The plain path the peek is held to: the compiled RequestHeader schema alone, at the header
    version the catalogue gives the frame's key and version."""
    buf = data if type(data) is bytes else bytes(data)
    if len(buf) < REQUEST_PREFIX_SIZE:
        raise _too_short(len(buf))
    api_key, api_version, _ = _PREFIX.unpack_from(buf, 0)
    return _read_with_schema(buf, request_header_version(api_key, api_version))


def _read_with_schema(buf: bytes, header_version: int) -> RequestHeader:
    api_key, api_version, _ = _PREFIX.unpack_from(buf, 0)
    decode = header_schema("request", header_version).compiled_codec()[0]
    try:
        header, pos = decode(buf, 0, len(buf))
    except DecodeError as exc:
        if exc.api_key is None:
            exc.api_key, exc.api_version = api_key, api_version
        raise
    except Exception as exc:  # a decoder bug must still surface as the project's error
        raise DecodeError(f"internal decoder error: {exc!r}", api_key=api_key,
                          api_version=api_version) from exc
    return RequestHeader(api_key, api_version, header["correlation_id"], header.get("client_id"),
                         header_version, pos)


_new_tuple = tuple.__new__  # a named tuple from all its fields, minus its Python-level __new__


def peek_request_header(data: bytes | bytearray | memoryview) -> RequestHeader:
    """The header of one request frame (without its size prefix), for any API key: known or not,
    the catalogue's header-version rule decides the layout. Bytes that are no header raise
    :class:`~kafkapy.errors.DecodeError` (``truncated`` when they merely end too soon)."""
    end = len(data)
    if end >= 10:
        key, version, corr, n = _PREFIX_AND_CLIENT_ID_LENGTH.unpack_from(data, 0)
        header_version = _header_versions.get(key * 65536 + version)
        if header_version is None:
            header_version = _header_version(key, version)
        if header_version == 0:
            return _new_tuple(RequestHeader, (key, version, corr, None, 0, REQUEST_PREFIX_SIZE))
        if n >= 0:
            pos = 10 + n
            if pos <= end:
                client_id: str | None = str(data[10:pos], "utf-8", JAVA_REPLACE)
                if header_version == 1:
                    return _new_tuple(RequestHeader, (key, version, corr, client_id, 1, pos))
                if pos < end and data[pos] == 0:  # v2 with no tagged fields, the common case
                    return _new_tuple(RequestHeader, (key, version, corr, client_id, 2, pos + 1))
        elif n == -1:  # a null client id
            if header_version == 1:
                return _new_tuple(RequestHeader, (key, version, corr, None, 1, 10))
            if end > 10 and data[10] == 0:
                return _new_tuple(RequestHeader, (key, version, corr, None, 2, 11))
    elif end < REQUEST_PREFIX_SIZE:
        raise _too_short(end)
    else:
        key, version, _ = _PREFIX.unpack_from(data, 0)
        header_version = _header_versions.get(key * 65536 + version)
        if header_version is None:
            header_version = _header_version(key, version)
    # tags in the header, a cut or malformed client id: the schema reads it or names the error
    return _read_with_schema(data if type(data) is bytes else bytes(data), header_version)
