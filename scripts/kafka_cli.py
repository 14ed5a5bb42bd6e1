"""Stand-ins for the two scripts of Kafka's distribution that librdkafka's test suite runs
(``$KAFKA_PATH/bin/kafka-topics.sh --create`` and ``kafka-acls.sh --add|--remove``), for machines
without Kafka (and Java). They send the same admin requests through confluent-kafka, so a test
passes or fails on what the broker answers, exactly as with Kafka's own tools.

    python kafka_cli.py topics --bootstrap-server H:P --create --topic T --partitions 1 \
        --replication-factor 1 --config k=v
    python kafka_cli.py acls --bootstrap-server H:P --add --deny-principal 'User:*' \
        --operation All --deny-host '*' --topic T

``--zookeeper ADDR`` is taken as the bootstrap address (the suite passes it for brokers it
believes older than 3.0). Exits 0 on success, 1 with the broker's error otherwise.
"""

from __future__ import annotations

import argparse
import sys

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

TIMEOUT_S = 30


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient({"bootstrap.servers": args.bootstrap_server or args.zookeeper})


def create_topic(args: argparse.Namespace) -> None:
    if not args.create:
        sys.exit("only --create is supported")
    configs = dict(item.split("=", 1) for item in args.config)
    topic = NewTopic(args.topic, num_partitions=args.partitions,
                     replication_factor=args.replication_factor, config=configs)
    client = _admin(args)  # kept until the answer: a collected client cancels its requests
    client.create_topics([topic], operation_timeout=TIMEOUT_S)[args.topic].result(TIMEOUT_S)


def change_acl(args: argparse.Namespace) -> None:
    """``--add`` (CreateAcls) or ``--remove`` (DeleteAcls of exactly that binding)."""
    if args.add == args.remove:
        sys.exit("give --add or --remove")
    allow = args.allow_principal is not None
    fields = (ResourceType.TOPIC, args.topic, ResourcePatternType.LITERAL,
              args.allow_principal if allow else args.deny_principal,
              (args.allow_host if allow else args.deny_host) or "*",
              AclOperation[args.operation.upper()],
              AclPermissionType.ALLOW if allow else AclPermissionType.DENY)
    client = _admin(args)
    if args.add:
        binding = AclBinding(*fields)
        client.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(TIMEOUT_S)
    else:
        acl_filter = AclBindingFilter(*fields)
        client.delete_acls([acl_filter], request_timeout=TIMEOUT_S)[acl_filter].result(
            TIMEOUT_S)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tool", choices=["topics", "acls"])
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--zookeeper")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--create", action="store_true")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--add", action="store_true")
    parser.add_argument("--remove", action="store_true")
    parser.add_argument("--force", action="store_true")    # kafka-acls.sh: no prompt
    for side in ("allow", "deny"):
        parser.add_argument(f"--{side}-principal")
        parser.add_argument(f"--{side}-host")
    parser.add_argument("--operation", default="All")
    args = parser.parse_args()
    try:
        (create_topic if args.tool == "topics" else change_acl)(args)
    except Exception as error:  # the broker's answer, whatever it is, ends the command
        print(f"kafka-{args.tool}.sh (BMQ stand-in): {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
