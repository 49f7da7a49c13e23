"""Where the control endpoint listens: ``HOST:PORT``, loopback only unless asked otherwise.

The endpoint can inject faults, delete every topic and stop brokers, and it has no
authentication, so by default it refuses any address another machine could reach. Only
``localhost`` and loopback literals (127.0.0.0/8, ::1) count as local: a host name is not
resolved (what it resolves to can change under the test), and 0.0.0.0 is every interface.
"""

from __future__ import annotations

import ipaddress

import attrs

from kafkapy.errors import KafkaPyError

__all__ = ["ControlAddress", "ControlAddressError", "parse_control_address"]

LOCAL_NAMES = frozenset({"localhost"})


class ControlAddressError(KafkaPyError):
    """A control address that cannot be used; the message says why, in one line."""


@attrs.frozen
class ControlAddress:
    host: str
    port: int  # 0: an ephemeral port, as for the broker's listeners

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_control_address(text: str, *, allow_remote: bool = False) -> ControlAddress:
    """``127.0.0.1:8080``, ``localhost:0`` or ``[::1]:8080``; a non-loopback host only with
    ``allow_remote``."""
    host, colon, port_text = text.strip().rpartition(":")
    if not colon or not host:
        raise ControlAddressError(f"control address {text!r} is not HOST:PORT (e.g. 127.0.0.1:8080)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ControlAddressError(f"control address {text!r}: the port {port_text!r} is not a number") \
            from None
    if not 0 <= port <= 65535:
        raise ControlAddressError(f"control address {text!r}: the port must be in 0-65535")
    if not allow_remote and not is_loopback(host):
        raise ControlAddressError(f"control address {text!r} is not a loopback address: the endpoint has no "
                                  "authentication; pass --control-allow-remote (allow_remote=True) to serve "
                                  "it beyond this machine")
    return ControlAddress(host, port)
