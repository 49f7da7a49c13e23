"""KIP-932's share coordinator: share-partition state kept in ``__share_group_state``."""
