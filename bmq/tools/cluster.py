"""`bmq cluster info`: brokers, controller, topic and partition counts."""

from __future__ import annotations

from typing import Any

import click

from bmq.tools.common import Connection, connection_options, output_option, print_json, print_table


@click.group()
def cluster() -> None:
    """Look at the cluster as a whole.

    \b
    Example:
      bmq cluster info -b broker1:9092
    """


def cluster_info(conn: Connection) -> dict[str, Any]:
    meta = conn.metadata()
    described = conn.wait(conn.admin().describe_cluster(request_timeout=conn.timeout),
                          "cannot describe the cluster")
    controller = described.controller
    topics = meta.topics
    internal = [name for name in topics if name.startswith("__")]
    return {
        "cluster_id": described.cluster_id,
        "controller": None if controller is None else controller.id,
        "brokers": [{"id": node.id, "host": node.host, "port": node.port, "rack": node.rack,
                     "controller": controller is not None and node.id == controller.id}
                    for node in sorted(described.nodes, key=lambda n: n.id)],
        "topics": len(topics) - len(internal),
        "partitions": sum(len(t.partitions) for n, t in topics.items() if n not in internal),
        "internal_topics": len(internal),
        "internal_partitions": sum(len(topics[n].partitions) for n in internal),
    }


@cluster.command()
@output_option
@connection_options
def info(conn: Connection, output: str) -> None:
    """Show the cluster id, the brokers, the controller and topic/partition counts.

    \b
    Example:
      bmq cluster info -o json
    """
    doc = cluster_info(conn)
    if output == "json":
        print_json(doc)
        return
    click.echo(f"Cluster {doc['cluster_id']}: {len(doc['brokers'])} brokers, controller "
               f"{doc['controller'] if doc['controller'] is not None else '-'}, "
               f"{doc['topics']} topics with {doc['partitions']} partitions "
               f"(+{doc['internal_topics']} internal with {doc['internal_partitions']})")
    print_table(None, ("ID", "HOST", "PORT", "RACK", "CONTROLLER"),
                [(b["id"], b["host"], b["port"], b["rack"], "yes" if b["controller"] else "")
                 for b in doc["brokers"]], right=("ID", "PORT"))
