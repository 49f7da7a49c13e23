"""The strict module: with ``kafkapy.strict=true``, records protocol misuse as Violations.

Off (the default) it installs nothing, so requests cost what they cost without it. On, its
interceptor (kafkapy.strict.interceptor) is installed when the broker starts, before any fault
rule can be, so it is the outermost one and sees the answers that are sent. Each violation is
also logged as a warning, for a ``kafkapy serve`` that no test reads.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, ClassVar

from kafkapy.server.config import ConfigKey
from kafkapy.server.modules import Module
from kafkapy.strict.interceptor import StrictInterceptor
from kafkapy.strict.violations import Violation, Violations

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["STRICT", "STRICT_CAPABILITY", "StrictModule"]

STRICT = "kafkapy.strict"
STRICT_CAPABILITY = "strict"


class StrictModule(Module):
    name = "strict"
    provides: ClassVar[tuple[str, ...]] = (STRICT_CAPABILITY,)
    config_keys: ClassVar[tuple[ConfigKey, ...]] = (
        ConfigKey(STRICT, "boolean", False,
                  "Record protocol misuse that Kafka tolerates (stale generations, commits for partitions "
                  "not assigned, out-of-order or duplicate sequences, unsupported versions) as violations "
                  "(kafkapy; docs/testing.md, Strict mode)."),
    )

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.enabled = bool(services.config[STRICT])
        self.violations = Violations()
        self.interceptor = StrictInterceptor(self.violations, services.served_versions, self._topic_name,
                                             self._log)

    async def start(self) -> None:
        if self.enabled:
            self.services.install_interceptor(self.interceptor)

    async def stop(self) -> None:
        if self.enabled:
            self.services.remove_interceptor(self.interceptor)

    def _log(self, violation: Violation) -> None:
        self.services.log.warning("strict mode: %s", violation)

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.services.cluster.topic_name(topic_id)
