"""Records as JSON text, written straight from the decoded batches.

A Fetch or Produce body is mostly records, so their JSON is the bulk of a
decoded capture's output. Going through a dict per record and the generic
JSON encoder costs about twice as much as writing the text directly, so the
capture decoder and the generated JSON decoders both come here. The output
equals ``json.dumps([r.to_dict() for r in records], separators=(",", ":"),
ensure_ascii=False)``; records that do not decode give an object naming the
error and holding the raw bytes, so no data is lost.
"""

from __future__ import annotations

import binascii
import json
from json.encoder import encode_basestring

from kafkapy.errors import DecodeError
from kafkapy.protocol.records import Records

__all__ = ["records_json"]


def _b64(data: bytes | bytearray | memoryview) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _header_text(key: str, value: bytes | None) -> str:
    v = "null" if value is None else f'"{_b64(value)}"'
    return f'{{"key":{encode_basestring(key)},"value":{v}}}'


def records_json(records: Records) -> str:
    """The records of ``records`` as a JSON list (CRCs are not checked: captures are read as sent)."""
    quote = encode_basestring
    b2a = binascii.b2a_base64
    parts: list[str] = []
    append = parts.append
    try:
        for r in records.records(check_crc=False):
            ts, key, value, headers = r.timestamp, r.key, r.value, r.headers
            # key and value inline: they are the bulk of the calls
            k = "null" if key is None else f'"{b2a(key, newline=False).decode()}"'
            v = "null" if value is None else f'"{b2a(value, newline=False).decode()}"'
            if not headers:
                h = ""
            elif len(headers) == 1:  # the common case, without a loop
                ((hk, hv),) = headers
                hj = "null" if hv is None else f'"{b2a(hv, newline=False).decode()}"'
                h = f'{{"key":{quote(hk)},"value":{hj}}}'
            else:
                h = ",".join([_header_text(hk, hv) for hk, hv in headers])
            append(
                f'{{"offset":{r.offset},"timestamp":{"null" if ts is None else ts},"key":{k},'
                f'"value":{v},"headers":[{h}]}}'
            )
    except DecodeError as exc:
        return json.dumps(
            {"undecodable_records": _b64(bytes(records)), "error": str(exc)},
            separators=(",", ":"), ensure_ascii=False,
        )  # fmt: skip
    return "[" + ",".join(parts) + "]"
