"""``bmq mirror``: a role that copies topics of a source cluster (any Kafka-compatible one,
reached as a Kafka client through ``bmq.client``) into a target BMQ cluster at the same offsets,
with their consumer groups' committed offsets, so consumers can move between the two.

* ``settings``: what a mirror copies, from where to where (its TOML file and flags);
* ``cluster``: one side's links, metadata and the requests the mirror sends it;
* ``topics``: which source topics are mirrored, their target topics created and kept in step
  (partition counts, configs), and which target topics are mirrors of this source;
* ``copier``: the batches themselves, fetched from the source's partition leaders and handed
  to the target's owners (BmqMirrorAppend), whose log end offsets are the durable progress;
* ``offsets``: consumer groups' committed offsets, copied once the target has the data;
* ``service``: the role's loop (retries with back-off, status, metrics); ``status``: lag as the
  two clusters tell it; ``command``: ``bmq mirror run | status | promote``.
"""
