"""An HTTP/JSON control endpoint for the embedded broker (issue 18 item 8), for tests in any language.

``kafkapy serve --control 127.0.0.1:8080`` or ``Broker(control="127.0.0.1:0")``: faults, seeding,
snapshots, reset, records, request history and the cluster's brokers over HTTP, described by
openapi.json (served at ``GET /openapi.json``). Loopback addresses only, unless asked. See
docs/control.md.
"""

from kafkapy.control.address import ControlAddress, ControlAddressError, parse_control_address
from kafkapy.control.errors import ControlError
from kafkapy.control.handlers import ROUTES, ControlApi
from kafkapy.control.routes import Route, Router
from kafkapy.control.server import ControlServer, openapi_document

__all__ = ["ROUTES", "ControlAddress", "ControlAddressError", "ControlApi", "ControlError", "ControlServer",
           "Route", "Router", "openapi_document", "parse_control_address"]
