"""BMQ: a storage-compute-separated, Kafka-compatible message queue."""
