"""Dynamic broker configs over the wire: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

See docs/quotas.md (the connection-quota settings are the dynamic ones served today).
``ConfigsModule`` is a built-in module, enabled by default; modules register the keys they let
change at run time with ``ConfigsModule.register(DynamicConfigs(...))``.
"""

from kafkapy.configs.module import ConfigsModule, DynamicConfigs

__all__ = ["ConfigsModule", "DynamicConfigs"]
