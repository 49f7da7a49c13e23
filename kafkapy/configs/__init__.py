"""Dynamic broker configs and topic configs over the wire: DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs.

See docs/quotas.md (the connection-quota settings are the dynamic broker ones served today) and
docs/topics.md (topic configs, and the ``topic-configs`` capability: ``log_config``,
``watch_log_configs``).
``ConfigsModule`` is a built-in module, enabled by default; modules register the keys they let
change at run time with ``ConfigsModule.register(DynamicConfigs(...))``.
"""

from kafkapy.configs.module import ConfigsModule, DynamicConfigs

__all__ = ["ConfigsModule", "DynamicConfigs"]
