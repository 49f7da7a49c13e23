"""SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER) and re-authentication (KIP-368), as Kafka serves them.

settings: a listener's mechanisms, users and session limits from Kafka's config keys; jaas: the
JAAS config parser; mechanism: what a mechanism's server side is; plain: SASL/PLAIN; scram: SCRAM
and Kafka's credential form; oauthbearer: RFC 7628's message and the OAUTHBEARER exchange;
unsecured_jws: the unsecured JWTs Kafka's default OAUTHBEARER validator accepts; signed_jws and jwks:
the signed JWTs Kafka's OAuthBearerValidatorCallbackHandler accepts (KIP-768) and the key sets that
verify them (the ``kafkapy[oauth]`` extra); credentials: the
module that keeps SCRAM credentials in the store and serves Describe/AlterUserScramCredentials;
authenticator: the per-connection state machine the connection runs frames through until
authenticated, and again to re-authenticate.
"""

from kafkapy.server.sasl.authenticator import Authenticator, SaslState, Step
from kafkapy.server.sasl.settings import SERVED_MECHANISMS, SaslSettings, sasl_settings

__all__ = ["SERVED_MECHANISMS", "Authenticator", "SaslSettings", "SaslState", "Step", "sasl_settings"]
