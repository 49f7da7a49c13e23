"""SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners (PLAIN, SCRAM-SHA-256/512), as
Kafka serves it.

settings: a listener's mechanisms and users from Kafka's config keys; jaas: the JAAS config
parser; mechanism: what a mechanism's server side is; plain: SASL/PLAIN; scram: SCRAM and Kafka's
credential form; credentials: the module that keeps SCRAM credentials in the store and serves
Describe/AlterUserScramCredentials; authenticator: the per-connection state machine the connection
runs frames through until authenticated.
"""

from kafkapy.server.sasl.authenticator import Authenticator, SaslState, Step
from kafkapy.server.sasl.settings import SERVED_MECHANISMS, SaslSettings, sasl_settings

__all__ = ["SERVED_MECHANISMS", "Authenticator", "SaslSettings", "SaslState", "Step", "sasl_settings"]
