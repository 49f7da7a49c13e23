"""A small OAuth/OIDC identity provider for the tests that need one (the broker's signed-token
validation, the CLI tools' OIDC login): a JWKS and a client_credentials token endpoint over https,
its certificate from a trustme CA written to a PEM file the broker and clients can trust."""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkapy.server.sasl.jwks import public_jwk
from kafkapy.server.sasl.settings import SIGNED_VALIDATOR
from kafkapy.server.sasl.signed_jws import make_signed_jws

ISSUER = "https://idp.test"
AUDIENCE = "kafka-cluster"
CLIENTS = {"svc-orders": "orders-secret", "alice": "alice-secret"}


class IdentityProvider:
    """An OAuth/OIDC provider for the test: ``/jwks`` (its public keys) and ``/token`` (RFC 6749's
    client_credentials grant with HTTP Basic client authentication, answering a JWT signed with its
    current key), over https with a trustme CA."""

    def __init__(self, ca: Any, tmp_path: Path) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {"k1": rsa.generate_private_key(public_exponent=65537,
                                                                                 key_size=2048)}
        self.kid = "k1"
        self.jwks_gets = 0
        self.token_requests: list[dict[str, str]] = []
        self.token_posts: list[tuple[str, str]] = []  # (Authorization header, form body) as sent
        self.outages: list[int] = []  # statuses the token endpoint answers first, one per request
        self.token_lifetime_s = 3600.0
        self.ca_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/jwks":
                    self.send_error(404)
                    return
                provider.jwks_gets += 1
                self._json(200, {"keys": [public_jwk(key, kid, use="sig", alg="RS256")
                                          for kid, key in provider.keys.items()]})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                form = dict(urllib.parse.parse_qsl(body))
                provider.token_posts.append((self.headers.get("Authorization", ""), body))
                credentials = self.headers.get("Authorization", "Basic ").split(" ", 1)[1]
                client_id, _, secret = base64.b64decode(credentials).decode().partition(":")
                provider.token_requests.append(form)
                if provider.outages:
                    self._json(provider.outages.pop(0), {"error": "temporarily_unavailable"})
                elif self.path != "/token" or form.get("grant_type") != "client_credentials":
                    self._json(400, {"error": "unsupported_grant_type"})
                elif CLIENTS.get(client_id) != secret:
                    self._json(401, {"error": "invalid_client",
                                     "error_description": "client authentication failed"})
                else:
                    token = provider.token(client_id, scope=form.get("scope", ""),
                                           lifetime_s=provider.token_lifetime_s)
                    self._json(200, {"access_token": token, "token_type": "Bearer",
                                     "expires_in": int(provider.token_lifetime_s)})

            def _json(self, status: int, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def token(self, sub: str | None = "alice", *, kid: str | None = None, lifetime_s: float = 3600,
              **claims: Any) -> str:
        """A token as this provider issues it (``sub=None``: without one)."""
        now = time.time()
        issued = {"iss": ISSUER, "aud": AUDIENCE, "iat": int(now), "exp": int(now + lifetime_s),
                  "scope": "kafka", **({"sub": sub} if sub is not None else {}), **claims}
        kid = kid or self.kid
        return make_signed_jws(issued, self.keys[kid], "RS256", kid)

    def rotate(self) -> str:
        """A new signing key, published in the JWKS (the old one stays, as providers keep it a while)."""
        kid = f"k{len(self.keys) + 1}"
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = kid
        return kid

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def broker_config(idp: IdentityProvider, **extra: Any) -> dict[str, Any]:
    """A SASL_PLAINTEXT OAUTHBEARER listener that checks signed tokens with ``idp``'s JWKS."""
    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            f'ssl.truststore.type="PEM" ssl.truststore.location="{idp.ca_file}";')
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": SIGNED_VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": f"{idp.url}/jwks",
            "sasl.oauthbearer.expected.issuer": ISSUER, "sasl.oauthbearer.expected.audience": AUDIENCE,
            **extra}


# Fixtures for the modules that use the provider (tests/conftest.py loads this module as a plugin).

@pytest.fixture(scope="module")
def certificate_authority() -> Any:
    """The CA the provider's https certificate comes from (one per test module)."""
    return pytest.importorskip("trustme").CA()


@pytest.fixture
def idp(certificate_authority: Any, tmp_path: Path) -> Iterator[IdentityProvider]:
    provider = IdentityProvider(certificate_authority, tmp_path)
    yield provider
    provider.close()
