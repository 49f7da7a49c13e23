"""The client quotas' ``applies`` filter held to its promise (kafkapy.server.interceptors).

``applies`` False lets the dispatcher skip the interceptor, so it may say False only where no stored
quota charges the request (no sensor resolves for its API) and the connection is not muted now.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.quotas.client_quotas import _MUTED_UNTIL, BYTE_RATE_KEYS, FETCH, PRODUCE, REQUEST, ClientQuotas
from kafkapy.quotas.metrics import MetricsRegistry
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.modules import RequestContext

PATHS = ["users/alice", "users/<default>", "clients/app", "clients/<default>", "users/alice/clients/app"]
APIS = [ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.OFFSET_COMMIT]
NOW = 100.0

entities = st.dictionaries(st.sampled_from(PATHS),
                           st.dictionaries(st.sampled_from(BYTE_RATE_KEYS), st.floats(1, 1e6), min_size=1),
                           min_size=1)


@given(entities, st.sampled_from(APIS), st.sampled_from(["alice", "bob"]), st.sampled_from(["app", "other"]),
       st.one_of(st.none(), st.floats(NOW - 5, NOW + 5)))
def test_a_request_the_quotas_do_not_apply_to_is_charged_nothing(
        stored: dict[str, dict[str, float]], api: int, user: str, client: str,
        muted_until: float | None) -> None:
    quotas = ClientQuotas(MetricsRegistry(), clock=lambda: NOW)
    quotas.set_entities(stored)
    info = ConnectionInfo(id="c", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                          client_address=("127.0.0.1", 1), broker_address=("127.0.0.1", 2),
                          principal=f"User:{user}")
    if muted_until is not None:
        info.attributes[_MUTED_UNTIL] = muted_until
    applies = quotas.applies(RequestContext(info, api, 9, 1, client))
    if applies:
        return
    assert muted_until is None or muted_until <= NOW  # before would not have waited
    charged = [REQUEST] + ([PRODUCE] if api == ApiKey.PRODUCE else [FETCH] if api == ApiKey.FETCH else [])
    assert all(quotas._sensor(key, user, client) is None for key in charged)
