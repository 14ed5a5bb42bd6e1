"""A group consumer process for the tests: confluent-kafka, kafka-python or aiokafka.

Run as ``python worker.py CLIENT BOOTSTRAP GROUP TOPIC [options]`` (``--protocol consumer``:
confluent-kafka with KIP-848's ``group.protocol=consumer``, ``--strategy`` its remote assignor).
It consumes one message at a time, "processes" it (sleeps ``--delay``), commits offset+1
synchronously, and only then reports it. Events go to stdout as JSON lines:

    {"event": "assigned", "partitions": [..]}     incremental or full, as the client reports
    {"event": "revoked", "partitions": [..]}
    {"event": "committing", "p": P, "o": O}       processed; about to commit O+1
    {"event": "processed", "p": P, "o": O}        the commit of O+1 succeeded
    {"event": "commit_failed", "p": P, "o": O, "error": "..."}
    {"event": "closed"}

SIGTERM makes it close the consumer cleanly (leaving the group) and exit; SIGKILL is a crash
(one killed after "committing" may or may not have committed that message).
A revocation only happens between messages, never between processing and committing, which is
what makes "processed exactly once" hold across rebalances.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
import time
from typing import Any

stopping = threading.Event()


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def commit_confluent(consumer: Any, offset: Any) -> None:
    """A synchronous commit. Under KIP-848 a commit racing the heartbeat that moves the member
    to a new epoch gets STALE_MEMBER_EPOCH, which librdkafka leaves to the application for
    manual commits: try again once the new epoch is known (the partition is still ours, a
    revocation only happens between messages)."""
    from confluent_kafka import KafkaError, KafkaException

    for attempt in range(50):
        try:
            consumer.commit(offsets=[offset], asynchronous=False)
            return
        except KafkaException as error:
            if error.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or attempt == 49:
                raise
            time.sleep(0.05)


def run_confluent(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "broker.address.family": "v4",
        "group.id": args.group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.protocol == "consumer":
        # KIP-848: the broker owns the timings and the assignor.
        conf["group.protocol"] = "consumer"
        if args.strategy:
            conf["group.remote.assignor"] = args.strategy
    else:
        conf.update({"session.timeout.ms": args.session_ms,
                     "heartbeat.interval.ms": args.heartbeat_ms,
                     "partition.assignment.strategy": args.strategy or "range,roundrobin"})
    if args.instance:
        conf["group.instance.id"] = args.instance
    consumer = Consumer(conf)

    def on_assign(c: Any, partitions: list[Any]) -> None:
        emit("assigned", partitions=sorted(p.partition for p in partitions))

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        emit("revoked", partitions=sorted(p.partition for p in partitions))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stopping.is_set():
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        time.sleep(args.delay)
        emit("committing", p=msg.partition(), o=msg.offset())
        try:
            commit_confluent(consumer, TopicPartition(msg.topic(), msg.partition(),
                                                      msg.offset() + 1))
        except KafkaException as error:
            emit("commit_failed", p=msg.partition(), o=msg.offset(), error=str(error))
            continue
        emit("processed", p=msg.partition(), o=msg.offset())
    consumer.close()
    emit("closed")


def run_kafka_python(args: argparse.Namespace) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import KafkaError

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms, max_poll_records=1,
        metadata_max_age_ms=1000, group_instance_id=args.instance)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer.subscribe([args.topic], listener=Listener())
    while not stopping.is_set():
        batch = consumer.poll(timeout_ms=100, max_records=1)
        for tp, records in batch.items():
            for record in records:
                time.sleep(args.delay)
                emit("committing", p=tp.partition, o=record.offset)
                try:
                    consumer.commit({tp: OffsetAndMetadata(record.offset + 1, "", -1)})
                except KafkaError as error:
                    emit("commit_failed", p=tp.partition, o=record.offset, error=repr(error))
                    continue
                emit("processed", p=tp.partition, o=record.offset)
    consumer.close()
    emit("closed")


def run_aiokafka(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError
    from aiokafka.structs import OffsetAndMetadata

    async def main() -> None:
        lock = asyncio.Lock()

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                async with lock:  # never in the middle of processing + committing
                    emit("revoked", partitions=sorted(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned: Any) -> None:
                emit("assigned", partitions=sorted(tp.partition for tp in assigned))

        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
            metadata_max_age_ms=1000, group_instance_id=args.instance)
        consumer.subscribe([args.topic], listener=Listener())
        await consumer.start()
        try:
            while not stopping.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=1)
                for tp, records in batch.items():
                    for record in records:
                        async with lock:
                            if tp not in consumer.assignment():
                                continue  # revoked meanwhile: its next owner reads it
                            await asyncio.sleep(args.delay)
                            emit("committing", p=tp.partition, o=record.offset)
                            try:
                                await consumer.commit(
                                    {tp: OffsetAndMetadata(record.offset + 1, "")})
                            except KafkaError as error:
                                emit("commit_failed", p=tp.partition, o=record.offset,
                                     error=repr(error))
                                continue
                            emit("processed", p=tp.partition, o=record.offset)
        finally:
            await consumer.stop()
        emit("closed")

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["confluent", "kafka-python", "aiokafka"])
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=300)
    parser.add_argument("--strategy", default="")
    parser.add_argument("--instance", default=None)
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    {"confluent": run_confluent, "kafka-python": run_kafka_python,
     "aiokafka": run_aiokafka}[args.client](args)


if __name__ == "__main__":
    main()
