"""docker-compose.yml cannot run here (no Docker): check it structurally instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from bmq.cli import main
from bmq.config import load_config

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def _services() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict) and "services" in doc
    services: dict[str, Any] = doc["services"]
    return services


def test_services_are_all_there() -> None:
    services = _services()
    assert {"zookeeper", "namenode", "datanode", "controller", "broker1", "broker2", "broker3",
            "proxy"} <= set(services)
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        for dependency in service.get("depends_on", []):
            assert dependency in services, (name, dependency)


def test_bmq_commands_parse_and_agree() -> None:
    services = _services()
    ids, advertised, storages = set(), set(), set()
    for name in ("controller", "broker1", "broker2", "broker3"):
        args = services[name]["command"]
        assert args[0] == "bmq"
        command = main.get_command(click.Context(main), args[1])
        assert command is not None, f"{name}: no command {args[1]!r}"
        ctx = command.make_context(args[1], list(args[2:]))   # parses, runs nothing
        assert ctx.params["zookeeper"] == "zookeeper:2181"
        storages.add(ctx.params["storage"])
        if args[1] == "broker":
            ids.add(ctx.params["broker_id"])
            advertised.add(_listeners(services, name)["INTERNAL"])
    assert ids == {1, 2, 3} and len(advertised) == 3
    assert storages == {"hdfs://namenode:8020/bmq"}
    assert services["proxy"]["command"][:2] == ["bmq", "proxy"]


def _listeners(services: dict[str, Any], name: str) -> dict[str, str]:
    """A node's advertised address per listener, checked against its service: INTERNAL is its
    service name, EXTERNAL localhost on a published port that reaches the EXTERNAL listener."""
    service = services[name]
    config = load_config(environ={k: str(v) for k, v in service["environment"].items()})
    listeners = {lst.name: lst for lst in config.listener_list}
    assert config.listener_list[0].name == "INTERNAL"   # what the nodes use between them
    internal, external = listeners["INTERNAL"], listeners["EXTERNAL"]
    assert internal.advertised_host == service.get("hostname", name) == name
    assert external.advertised_host == "localhost"
    published = {int(host): int(inside) for host, inside in
                 (str(mapping).split(":") for mapping in service["ports"])}
    assert published[external.advertised_port] == external.port
    return {lst.name: f"{lst.advertised_host}:{lst.advertised_port}" for lst in listeners.values()}


def test_host_clients_reach_every_node() -> None:
    services = _services()
    for name in ("broker1", "broker2", "broker3", "proxy"):
        assert set(_listeners(services, name)) == {"INTERNAL", "EXTERNAL"}


def test_brokers_reach_the_controllers_liveness_channel() -> None:
    # The controller listens for brokers' liveness channels on its listen host; a wildcard one
    # is advertised as the host name, which the other containers resolve.
    controller = _services()["controller"]
    config = load_config(environ={k: str(v) for k, v in controller["environment"].items()})
    assert config.listen_host == "0.0.0.0" and controller["hostname"] == "controller"
