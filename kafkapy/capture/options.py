"""The decoder's two options that name things, checked once for every entry point.

``kafka_ports`` and ``bodies`` reach the decoder from ``kafkapy decode``'s flags, from
``decode_capture`` and from the Spark readers. A value the decoder cannot use must fail there,
in one line, rather than decode quietly as if it were absent: an API name in ``bodies`` (which
the flag takes) would otherwise match no key and leave every body undecoded, and port 0 would
name no connection.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["body_api_keys", "port_number", "port_numbers"]


def port_number(value: object) -> int:
    """A TCP port (1-65535), from an int or its digits; ValueError for anything else."""
    number = int(value.strip()) if isinstance(value, str) and value.strip().isdecimal() else value
    if type(number) is not int or not 0 < number < 65536:
        raise ValueError(f"{value!r} is not a TCP port (1-65535)")
    return number


def port_numbers(ports: int | Iterable[int]) -> tuple[int, ...]:
    """``kafka_ports``: one port or several, each checked by :func:`port_number`."""
    if isinstance(ports, (int, str)):
        return (port_number(ports),)
    return tuple(port_number(p) for p in ports)


def body_api_keys(bodies: Iterable[int | str] | None) -> frozenset[int] | None:
    """``bodies``: None (every API) or the API keys whose bodies are decoded, each given as a key
    or a name (``Produce``, any case), as ``--bodies`` takes them. A key outside kafkapy's
    catalogue, or a name that is none of its APIs', is a ValueError: no body of it could be
    decoded."""
    if bodies is None:
        return None
    from kafkapy.protocol import catalogue

    if isinstance(bodies, (int, str)):
        bodies = (bodies,)
    known = catalogue()
    by_name = {spec.name.lower(): key for key, spec in known.items()}
    keys: set[int] = set()
    for item in bodies:
        if isinstance(item, str) and item.strip().lstrip("-").isdecimal():
            item = int(item.strip())  # str.strip takes more than int() does (a \x1f)
        if isinstance(item, int) and not isinstance(item, bool):
            if item not in known:
                raise ValueError(f"unknown API key {item} (not in kafkapy's catalogue)")
            keys.add(int(item))
        elif isinstance(item, str) and item.strip().lower() in by_name:
            keys.add(by_name[item.strip().lower()])
        else:
            raise ValueError(f"unknown API {item!r} (give a name such as Produce, or a key)")
    return frozenset(keys)
