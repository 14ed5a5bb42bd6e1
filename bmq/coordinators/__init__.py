"""Coordinators of internal logs: state sharded over the partitions of an internal topic, loaded
by whichever broker owns each partition. ``base``: what a coordinator is and needs of its broker;
``sharded``: the shared part (lazy start, shards, errors, append-and-wait-durable); ``tasks``: their
background work; ``snapshots``: how a snapshotted log stays small (each internal log's compaction
is declared in ``bmq.metadata.topics.INTERNAL_LOGS``); ``placement``: which partition a key
lives on. ``groups``: consumer groups on ``__consumer_offsets``; ``transactions``:
``__transaction_state``; ``share``: share groups, their state on ``__share_group_state``."""
