"""A cluster's metadata in ZooKeeper, shared by brokers, controllers, proxies and tools:

``layout``        the znodes, the partition states, connecting, the small JSON documents
``topics``        topics (a ``TopicRegistry`` whose source of truth is ZooKeeper)
``producer_ids``  producer-id blocks taken by compare-and-set
``state``         what operators read and ask: partition states, brokers, proxies, drains
"""
