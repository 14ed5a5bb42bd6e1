"""What a cluster knows about itself, for every role: its nodes (``nodes``), topics
(``topics``), producer-id blocks (``producer_ids``) and which proxy leads a partition
(``routing``), kept in a `bmq serve` data directory (``local``) or in ZooKeeper (``zookeeper``)."""
