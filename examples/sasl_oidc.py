"""An embedded broker validating signed OAUTHBEARER tokens (KIP-768) as Kafka's
OAuthBearerValidatorCallbackHandler does, and a confluent-kafka producer that gets its tokens from
an OAuth token endpoint (librdkafka's ``sasl.oauthbearer.method=oidc``). Runs offline: the identity
provider is a few lines here, serving its JWKS and a client_credentials token endpoint on localhost.

    python examples/sasl_oidc.py      # prints what each client saw, as JSON
    (needs the cryptography package: pip install 'kafkapy[oauth]')

The listener names Kafka's validator in ``listener.name.<listener>.oauthbearer.sasl.server.
callback.handler.class`` and the provider's JWKS in ``sasl.oauthbearer.jwks.endpoint.url``; the broker
fetches the JWKS when it starts, and checks each token's signature, expiry, issuer and audience. The
client ``orders-service`` authenticates with its id and secret, and the broker sees it as
``User:orders-service`` (the token's ``sub``). A client whose token is signed by a key the provider
never published is refused with Kafka's ``{"status":"invalid_token"}``.
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
import urllib.parse
from typing import Any

from confluent_kafka import KafkaError, Producer
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkapy import Broker
from kafkapy.server.sasl.jwks import public_jwk
from kafkapy.server.sasl.signed_jws import make_signed_jws

ISSUER, AUDIENCE = "http://idp.example", "kafka"
SECRETS = {"orders-service": "s3cret"}
SIGNING_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def issue(subject: str, key: rsa.RSAPrivateKey = SIGNING_KEY) -> str:
    now = int(time.time())
    return make_signed_jws({"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600,
                            "scope": "kafka"}, key, "RS256", kid="key-1")


class IdentityProvider(http.server.BaseHTTPRequestHandler):
    """GET /jwks: the public key; POST /token: a signed JWT for a client with the right secret."""

    def do_GET(self) -> None:
        self.answer(200, {"keys": [public_jwk(SIGNING_KEY, "key-1", use="sig", alg="RS256")]})

    def do_POST(self) -> None:
        form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
        client, _, secret = base64.b64decode(self.headers["Authorization"].split()[1]).decode().partition(":")
        if form.get("grant_type") == "client_credentials" and SECRETS.get(client) == secret:
            self.answer(200, {"access_token": issue(client), "token_type": "Bearer", "expires_in": 3600})
        else:
            self.answer(401, {"error": "invalid_client"})

    def answer(self, status: int, document: dict[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    idp = http.server.ThreadingHTTPServer(("127.0.0.1", 0), IdentityProvider)
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    idp_url = f"http://127.0.0.1:{idp.server_address[1]}"
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": f"{idp_url}/jwks",
        "sasl.oauthbearer.expected.issuer": ISSUER, "sasl.oauthbearer.expected.audience": AUDIENCE,
    }
    with Broker(config) as broker:
        common = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "OAUTHBEARER"}
        producer = Producer({**common, "sasl.oauthbearer.method": "oidc",
                             "sasl.oauthbearer.client.id": "orders-service",
                             "sasl.oauthbearer.client.secret": SECRETS["orders-service"],
                             "sasl.oauthbearer.token.endpoint.url": f"{idp_url}/token"})
        for n in range(3):
            producer.produce("orders", f"order #{n}".encode())
        unsent = producer.flush(10)
        seen_as = sorted({c.principal for c in broker.connections() if c.authentications})

        forged = issue("mallory", rsa.generate_private_key(public_exponent=65537, key_size=2048))
        errors: list[KafkaError] = []
        refused = Producer({**common, "error_cb": errors.append, "reconnect.backoff.ms": 1000,
                            "oauth_cb": lambda _config: (forged, time.time() + 3600, "mallory", {})})
        refused.produce("orders", b"let me in")
        refused.flush(2)
    idp.shutdown()
    authentication = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    print(json.dumps({"orders-service": {"produced": 3, "unsent": unsent, "broker_saw": seen_as},
                      "mallory": {"authentication_error": authentication[0] if authentication else None}},
                     indent=2))


if __name__ == "__main__":
    main()
