"""The broker side of cluster mode: ZooKeeper metadata, registration, ownership, the ack lease.

``zk``         ZooKeeper layout and the small JSON documents kept there
``registry``   topics from ZooKeeper (a ``TopicRegistry`` whose source of truth is ZooKeeper)
``lease``      the ack lease: acknowledge only while ZooKeeper contact is recent
``node``       one broker's membership: registration, metadata cache, partition ownership, drain
``groups``     the group coordinator of a cluster broker (loads offsets partitions it is given)
``server``     `bmq broker`: the process lifecycle
"""
