"""A consume-transform-produce processor, run as its own process by test_processor_crash.py:
reads ``in`` in group ``group``, writes each value upper-cased to ``out`` in transactions of up
to 10 records with the consumed offsets (send_offsets_to_transaction), until killed.

    python tests/transactions/processor.py BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, Producer


def main() -> None:
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5})
    producer.init_transactions(30)
    while True:
        messages = consumer.consume(10, timeout=0.5)
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            assert message.error() is None, message.error()
            producer.produce(sink, message.value().upper(), partition=message.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        print(f"committed {len(messages)}", flush=True)


if __name__ == "__main__":
    main()
