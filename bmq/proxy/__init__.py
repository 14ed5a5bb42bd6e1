"""The proxy tier (`bmq proxy`): stateless servers that answer consumers from shared storage.

Clients bootstrap to proxies. Metadata names proxies as partition leaders (rendezvous hashing
over the live proxies, ``bmq.metadata.routing``); Fetch, ListOffsets and OffsetForLeaderEpoch
are answered from the partitions' logs on storage through the read path (``bmq.readpath``: a
byte-bounded record cache shared by every consumer); Produce is forwarded to the owning
brokers; every other API is relayed to a broker (``handlers``). A fetch that finds no new data
waits, and is woken by the owning broker's notice of new durable data (``BmqWatchPartitions``, one
request parked per broker, ``proxy.BrokerWatcher``), never by polling storage.
"""
