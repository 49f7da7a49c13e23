"""Client quotas (DescribeClientQuotas, AlterClientQuotas) and connection quotas (KIP-402, KIP-612).

See docs/quotas.md. ``QuotasModule`` is a built-in module, enabled by default.
"""

from kafkapy.quotas.module import QuotasModule

__all__ = ["QuotasModule"]
