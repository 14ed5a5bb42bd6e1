"""``ssl.principal.mapping.rules``, Kafka's rules for the principal of a client certificate: the
rules' grammar and semantics (Kafka's own examples), and a real client (confluent-kafka over
SSL with a client certificate) authorised by ACLs on the mapped principal; a certificate no rule
maps is refused, rules that do not parse stop the broker's start."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AclOperation, AdminClient, ResourcePatternType, ResourceType

from bmq.config import load_config
from bmq.security.principal_mapping import PrincipalMapper, PrincipalMappingError
from bmq.security.session import Security, SecurityConfigError
from tests.conftest import BrokerFactory, free_port
from tests.security.conftest import Certificates, add_user, secure_broker
from tests.security.test_acls import ADMIN, SECRET, allow, conf, produce_error
from tests.security.test_clients import tls_settings

# Kafka's documented example rules.
KAFKA_EXAMPLE = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                 "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                 "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
                 "DEFAULT")


@pytest.mark.parametrize(("subject", "name"), [
    ("CN=kafka-server,OU=ServiceUsers,O=Org,C=US", "kafka-server"),
    ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US", "duke@javasoft"),
    ("CN=Duke,OU=JavaSoft,O=Sun Microsystems", "duke"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafkas_example_rules(subject: str, name: str) -> None:
    assert PrincipalMapper(KAFKA_EXAMPLE).name(subject) == name


def test_replacements_and_escapes_read_as_in_kafka() -> None:
    # $0 is the whole match, $12 with two groups is group 1 then "2", $3 past the groups is
    # literal text, \$ a dollar; /U upper-cases; \/ is a slash inside the pattern.
    mapper = PrincipalMapper(r"RULE:^CN=(a\/b),OU=(.*)$/$1 $2 $12 $3 \$ $0/U")
    assert mapper.name("CN=a/b,OU=ops") == "A/B OPS A/B2 $3 $ CN=A/B,OU=OPS"
    assert PrincipalMapper("").name("CN=x") == "CN=x"             # empty: DEFAULT
    assert PrincipalMapper("RULE:^CN=bob$/bob/").name("CN=alice") is None


@pytest.mark.parametrize("rules", ["RULE:a/b/Q", "RULE:abc", "DEFAULTX", "RULE:(/x/"])
def test_rules_that_do_not_parse_are_refused(rules: str, certificates: Certificates) -> None:
    with pytest.raises(PrincipalMappingError, match=r"ssl\.principal\.mapping\.rules"):
        PrincipalMapper(rules)
    config = load_config(environ={"BMQ_LISTENERS": f"SSL://127.0.0.1:{free_port()}",
                                  "BMQ_SSL_KEYSTORE_LOCATION": str(certificates.server),
                                  "BMQ_SSL_PRINCIPAL_MAPPING_RULES": rules})
    with pytest.raises(SecurityConfigError, match=r"listener SSL: ssl\.principal\.mapping\.rules"):
        Security(config, config.listener_list)


def test_a_client_certificate_is_authorised_as_its_mapped_principal(
        broker_factory: BrokerFactory, certificates: Certificates) -> None:
    # alice's certificate is CN=alice,OU=ops,O=example: the rule makes it User:alice.ops, the
    # only principal the ACL lets write mapped-* (unmapped, it is User:CN=alice,OU=ops,...).
    secured = secure_broker(broker_factory, certificates, **{
        "authorizer.class.name": "bmq", "super.users": "User:admin",
        "ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules":
            "RULE:^CN=([^,]*),OU=([^,]*),.*$/$1.$2/L,RULE:^CN=nobody,.*$/nobody/"})
    secured.broker.stop()
    add_user(secured.broker.data_dir, ADMIN, SECRET)
    secured.broker.start()
    admin = AdminClient(conf(secured, ADMIN))
    futures = admin.create_acls([
        allow(ResourceType.TOPIC, "mapped-", operation, "User:alice.ops",
              ResourcePatternType.PREFIXED)
        for operation in (AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE)])
    for future in futures.values():
        future.result(timeout=15)
    client = {"bootstrap.servers": secured.bootstrap("SSL"), **tls_settings(certificates, True)}
    assert produce_error(client, "mapped-orders") is None
    error = produce_error(client, "other-orders")
    assert error is not None and error.code() == 29   # TOPIC_AUTHORIZATION_FAILED


def test_a_certificate_no_rule_maps_is_refused(broker_factory: BrokerFactory,
                                                certificates: Certificates) -> None:
    secured = secure_broker(broker_factory, certificates, **{
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=bob,.*$/bob/"})
    client = AdminClient({"bootstrap.servers": secured.bootstrap("SSL"),
                          **tls_settings(certificates, True)})
    with pytest.raises(KafkaException):
        client.list_topics(timeout=5)
    audit = [line for line in secured.broker.log_text().splitlines()
             if "authentication-failed" in line and "listener=SSL" in line]
    assert any("CN=alice,OU=ops,O=example" in line for line in audit), audit
    # Other listeners are not concerned.
    AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")}).list_topics(timeout=10)
