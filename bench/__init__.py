"""bmq-bench: a throughput and latency benchmark for any Kafka-compatible server.

Run ``python -m bench --help``. The producing and consuming is done with
confluent-kafka (librdkafka), so the figures are those a real client sees.
"""

__version__ = "0.1.0"
