"""kafkapy's sans-I/O protocol layer: Kafka message specs compiled into construct codecs.

No sockets, asyncio, kazoo or pyspark anywhere below this package.
"""

from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol.catalogue import ApiSpec, api_name, catalogue, get_api
from kafkapy.protocol.codec import (
    RenderedRequest,
    RenderedResponse,
    Request,
    RequestHeader,
    Response,
    UnknownApiError,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_request_json,
    decode_response,
    decode_response_json,
    encode_request,
    encode_response,
    fit_body,
    json_body_decoder,
    message_schema,
)
from kafkapy.protocol.connection import ClientConnection, ProtocolError, ResponseReceived, ServerConnection
from kafkapy.protocol.header import peek_request_header, unpack_request_prefix
from kafkapy.protocol.json_decoder import RenderedBody
from kafkapy.protocol.records import Record, RecordBatch, Records, build_record_batch
from kafkapy.protocol.schema import Body

__all__ = [
    "ApiSpec",
    "Body",
    "ClientConnection",
    "DecodeError",
    "EncodeError",
    "ProtocolError",
    "Record",
    "RecordBatch",
    "Records",
    "RenderedBody",
    "RenderedRequest",
    "RenderedResponse",
    "Request",
    "RequestHeader",
    "Response",
    "ResponseReceived",
    "ServerConnection",
    "UnknownApiError",
    "UnsupportedVersionError",
    "api_name",
    "build_record_batch",
    "catalogue",
    "decode_request",
    "decode_request_header",
    "decode_request_json",
    "decode_response",
    "decode_response_json",
    "encode_request",
    "encode_response",
    "fit_body",
    "get_api",
    "json_body_decoder",
    "message_schema",
    "peek_request_header",
    "unpack_request_prefix",
]
