"""BMQ's Kafka client layer: what a process needs to be a Kafka *client* of a cluster, below
the roles that are one (the proxy forwarding its clients' requests, the `bmq` client commands,
and roles to come that consume from or produce to a cluster).

* ``login``: the TLS context and SASL login that librdkafka-style properties describe;
* ``requests``: one request to one broker, and one request to each of several brokers at once;
* ``liveness``: a request waited for while its broker is alive, given up on once the broker is
  stalled (frozen or cut off: silent on the link and to probes on a connection of its own);
* ``produce``: a Produce request split by partition owner, each owner's part forwarded as a unit
  of its own, batches held and re-sent while their partition moves (Kafka's retriable
  NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE), the answers merged into one response.
* ``metadata``: what a client learns from Metadata (brokers, topics, partition leaders),
  refreshed on demand, with age and when a leader turns out stale; a ``ProduceTargets``.

Connections themselves (``BrokerLink``, ``LinkPool``) are ``bmq.net.client``'s: brokers use
them too, for their peers.
"""
