"""Integration tests: real Kafka clients (confluent-kafka, kafka-python, aiokafka, kcat) and
hand-built wire frames against a `bmq serve` subprocess started by tests/conftest.py.

Run everything::

    .venv/bin/python -m pytest tests/integration -q

Useful knobs: ``-k`` to select, ``-s`` to see per-test figures (latencies, fuzz counts),
``BMQ_FUZZ_SEED=<n>`` to replay a fuzz run. A failing test's report includes the tail of the
broker's log; full logs stay under pytest's basetemp (``--basetemp=DIR`` to choose it).
"""
