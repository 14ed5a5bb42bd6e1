"""A share consumer in a process of its own (so a test can kill it with SIGKILL): prints one
line per event, flushed at once.

    python worker.py BOOTSTRAP GROUP TOPIC ACK [HOLD]

Every record is printed as ``got OFFSET DELIVERY_COUNT`` and acknowledged with ACK (accept,
release or reject); once a commit of acknowledgements is answered, ``acked OFFSET...``. With
HOLD the worker stops acknowledging after HOLD records, prints ``holding OFFSET...`` for the
next batch it polls, and waits to be killed.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

ACKS = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
        "reject": AcknowledgeType.REJECT}


def say(*words: object) -> None:
    print(*words, flush=True)


def main(bootstrap: str, group: str, topic: str, ack: str, hold: int | None) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    say("ready")
    acked = 0
    while True:
        messages = [m for m in consumer.poll(0.5) if m.error() is None]
        if hold is not None and acked >= hold and messages:
            say("holding", *(m.offset() for m in messages))
            while True:
                time.sleep(60)
        for m in messages:
            say("got", m.offset(), m.delivery_count())
            consumer.acknowledge(m, ACKS[ack])
        if messages:
            results = consumer.commit_sync()
            if all(error is None for error in results.values()):
                say("acked", *(m.offset() for m in messages))
                acked += len(messages)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4],
         int(sys.argv[5]) if len(sys.argv) > 5 else None)
