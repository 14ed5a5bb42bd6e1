"""Coordinators of internal logs: state sharded over the partitions of an internal topic, loaded
by whichever broker owns each partition. ``base``: what a coordinator is and needs of its broker;
``sharded``: the shared part (shards, errors, append-and-wait-durable); ``placement``: which
partition a key lives on. ``groups``: consumer groups on ``__consumer_offsets``."""
