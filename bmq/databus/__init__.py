"""``bmq databus`` (issue #35): a per-host agent applications produce to instead of the
cluster. It is a Kafka client of the cluster through ``bmq.client``, never a copy of the
proxy's forwarding.

* ``settings``: the agent's ``[databus]`` table and flags;
* ``streams``: logical streams routed as their mappings say, and the partitioners; the
  mappings are kept with the cluster's metadata and served by its brokers
  (bmq/metadata/databus_streams.py);
* ``kafka_port``: the Kafka protocol on a local port (ApiVersions, Metadata, InitProducerId,
  Produce); ``http``: ``POST /streams/NAME`` on a port and/or a Unix socket;
* ``intake``: a message's way in, whatever the door: routed, checked, placed, waited for;
* ``batcher``: messages merged into large compressed batches per topic partition;
* ``spool``: the durable, bounded spool every batch is written to before it is acknowledged
  or sent; ``sender``: spooled batches to the cluster, in order per partition, as an
  idempotent producer; ``cluster``: the cluster as the agent sees it;
* ``agent``: the role, wiring them; ``command``: ``bmq databus run | map``.
"""
