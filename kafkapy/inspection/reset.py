"""What ``Broker.reset()`` does to the coordinators: every group and transactional id forgotten.

Theory of operation. A reset must leave a long-lived broker as a fresh one would be, in well
under a millisecond, while clients may still be connected. Deleting groups one by one through
DeleteGroups (tombstones per offset) refuses live groups and costs a write per group; aborting
open transactions writes markers to partitions the reset deletes anyway. So instead:

1. each broker's group coordinator drops its groups, members, offsets (committed and pending
   transactional) and timers, answering waiting JoinGroup/SyncGroup requests UNKNOWN_MEMBER_ID;
   its transaction coordinator drops its transactional ids and stops ending transactions; its
   share coordinator drops the share-partition states it loaded;
2. the coordinators' own logs, ``__consumer_offsets``, ``__transaction_state`` and
   ``__share_group_state``, start over
   empty at their current end offset (with fresh producer state), so a coordinator that loads a
   partition later (a leadership move, a restart with log.dirs) finds nothing to bring back.

Offsets keep rising across resets (nothing that cached a position sees it go backwards). A client
still connected hears what Kafka answers for a group or transactional id it does not know:
UNKNOWN_MEMBER_ID for a classic member's Heartbeat, SyncGroup or commit, ILLEGAL_GENERATION for
a commit with an old generation, INVALID_PRODUCER_ID_MAPPING for a transactional producer's next
AddPartitionsToTxn or EndTxn; it rejoins or re-initializes as it would after a coordinator loss.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkapy.dataplane.partitions import LogHome
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.partitioning import OFFSETS_TOPIC
from kafkapy.server.modules import Module
from kafkapy.shares.module import ShareModule
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC
from kafkapy.sharestate.module import ShareCoordinatorModule
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC
from kafkapy.transactions.module import TransactionsModule

__all__ = ["COORDINATOR_TOPICS", "empty_coordinator_logs", "forget_groups_and_transactions"]

COORDINATOR_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})


def forget_groups_and_transactions(modules: Iterable[Module]) -> None:
    """Step 1 on one broker (its modules), on its loop."""
    for module in modules:
        if isinstance(module, GroupsModule):
            module.forget_everything()
        elif isinstance(module, TransactionsModule):
            module.coordinator.forget_all()
        elif isinstance(module, ShareModule):
            module.forget_everything()
        elif isinstance(module, ShareCoordinatorModule):
            module.coordinator.forget_all()


def empty_coordinator_logs(home: LogHome) -> None:
    """Step 2 on one log home: every partition of the coordinators' topics that holds anything
    starts over empty at its end offset, with its producer table built again (so a transaction
    left open there holds no last stable offset back)."""
    emptied = []
    with home.lock:
        for (topic, partition), log in list(home.logs.logs.items()):
            if topic not in COORDINATOR_TOPICS or log.log_start_offset == log.log_end_offset:
                continue
            log.truncate_fully_and_start_at(log.log_end_offset)
            home.producers.pop((topic, partition), None)
            emptied.append((topic, partition, log))
    for topic, partition, log in emptied:  # outside the lock, which producer_state takes itself
        home.producer_state(topic, partition, log)
