"""Feature versioning (KIP-584, seed 004): supported and finalized features, and the gates on them.

Every module declares the features it supports (``Module.features``, name -> (min, max)); a
broker's supported features are their union, capped by ``supported.features.max``, and go into
its registration. The finalized features live in the metadata store (/feature on ZooKeeper; the
epoch is the znode version) and every broker caches them through a watch. This module:

* finalizes every supported feature at its default level on the first start of a fresh cluster
  (``features.finalize.on.start``); the default is the highest supported level unless a module
  names another in ``default_feature_levels`` (name -> level);
* refuses to start a broker that cannot run at the finalized levels, and shuts a running broker
  down when a finalized change it cannot run with arrives through its watch;
* keeps the broker's finalized features current (``BrokerServices.set_finalized_features``),
  which opens and closes the gates of ``ApiHandler.feature`` (ApiVersions stops advertising
  gated-off APIs, and they get the empty response);
* serves UpdateFeatures (57, v0-2) and the seed's DeleteFeatures (1020), on the controller only,
  with ALTER on the cluster.

The features of kafkapy's own modules are named here; docs/features.md describes them.
"""

from __future__ import annotations

from kafkapy.features.module import FeatureIncompatible, FeaturesModule

__all__ = ["FEATURE_COORDINATOR", "FEATURE_IP_QUOTA", "FeatureIncompatible", "FeaturesModule"]

# Per-IP connection quotas (the quotas module, level 1).
FEATURE_IP_QUOTA = "kafkapy.ip_quota"
# The consumer coordinator of seed 001 (API keys 1000-1004).
FEATURE_COORDINATOR = "kafkapy.coordinator"
