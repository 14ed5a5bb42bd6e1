"""Listeners: the addresses a role accepts clients on, and what each tells its clients.

Kafka's model: ``listeners`` names each socket (``INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092``),
``advertised.listeners`` says which address Metadata gives for each name
(``INTERNAL://broker1:9092,EXTERNAL://localhost:19092``), and a client is always told the
addresses of the listener it connected on, so containers reach each other by service name while a
client on the host reaches the published ports. Nodes reach each other (a proxy forwarding to a
broker) through ``inter.broker.listener.name``, by default the first listener.

``listen`` and ``advertise`` remain the one-listener shorthand (a listener named PLAINTEXT).
Each listener speaks the security protocol ``listener.security.protocol.map`` gives it (a listener
named after a protocol uses it): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (bmq/security/).
"""

from __future__ import annotations

from dataclasses import dataclass

PLAINTEXT = "PLAINTEXT"
# Kafka's security protocols (a listener named after one uses it), and those BMQ serves.
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
KAFKA_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
TLS_PROTOCOLS = (SSL, SASL_SSL)
SASL_PROTOCOLS = (SASL_PLAINTEXT, SASL_SSL)
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class ListenerError(ValueError):
    """A listener setting that cannot be used."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str               # bind address
    port: int
    advertised_host: str    # what Metadata says for this listener
    advertised_port: int
    protocol: str = PLAINTEXT   # Kafka's security protocol of the listener

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def split_host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ListenerError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def _named_addresses(setting: str, text: str) -> dict[str, tuple[str, int]]:
    """``NAME://HOST:PORT,...`` in order; names are case-insensitive, as in Kafka."""
    found: dict[str, tuple[str, int]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        if not sep or not name:
            raise ListenerError(f"{setting}: expected NAME://HOST:PORT, got {item!r}")
        name = name.upper()
        if name in found:
            raise ListenerError(f"{setting}: listener {name} is given twice")
        found[name] = split_host_port(address)
    return found


def _protocols(text: str) -> dict[str, str]:
    protocols: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if item:
            name, sep, protocol = item.partition(":")
            if not sep:
                raise ListenerError(
                    f"listener.security.protocol.map: expected NAME:PROTOCOL, got {item!r}")
            protocols[name.strip().upper()] = protocol.strip().upper()
    return protocols


def parse_listeners(listeners: str, advertised_listeners: str, protocol_map: str,
                    listen: str, advertise: str) -> list[Listener]:
    """The listeners of a role, the first being the one other nodes use unless named otherwise.

    With no ``listeners`` the role has one, PLAINTEXT, on ``listen`` advertised as ``advertise``.
    A listener missing from ``advertised_listeners`` advertises its bind address (a wildcard
    bind advertising 127.0.0.1)."""
    if not listeners:
        bound = {PLAINTEXT: split_host_port(listen)}
        advertised = {PLAINTEXT: split_host_port(advertise)} if advertise else {}
    else:
        bound = _named_addresses("listeners", listeners)
        advertised = _named_addresses("advertised.listeners", advertised_listeners)
    unknown = sorted(set(advertised) - set(bound))
    if unknown:
        raise ListenerError(f"advertised.listeners names {', '.join(unknown)}, "
                            f"which listeners does not define")
    protocols = _protocols(protocol_map)
    result = []
    for name, (host, port) in bound.items():
        protocol = protocols.get(name, name if name in KAFKA_PROTOCOLS else PLAINTEXT)
        if protocol not in KAFKA_PROTOCOLS:
            raise ListenerError(f"listener {name}: unknown security protocol {protocol} "
                                f"(expected one of {', '.join(KAFKA_PROTOCOLS)})")
        adv_host, adv_port = advertised.get(name, (host, port))
        if adv_host in WILDCARD_HOSTS:
            adv_host = "127.0.0.1"
        result.append(Listener(name, host, port, adv_host, adv_port, protocol))
    return result


def inter_broker_listener(listeners: list[Listener], name: str) -> Listener:
    """The listener other nodes connect to: ``name``, or the first."""
    if not name:
        return listeners[0]
    for listener in listeners:
        if listener.name == name.upper():
            return listener
    raise ListenerError(f"inter.broker.listener.name {name} is not one of the listeners "
                        f"({', '.join(listener.name for listener in listeners)})")
