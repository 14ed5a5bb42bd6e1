"""Coordinators of internal logs: state sharded over the partitions of an internal topic, loaded
by whichever broker owns each partition (``base``). ``groups``: consumer groups on
``__consumer_offsets``."""
