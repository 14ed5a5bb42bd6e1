"""SCRAM users: made with `bmq user add` before the broker starts (and refused while it runs),
changed through the broker with confluent-kafka's AdminClient (AlterUserScramCredentials,
DescribeUserScramCredentials), effective at once for new connections; never a password stored."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.conftest import bmq_command
from tests.integration.helpers import round_trip_in_a_group
from tests.security.conftest import PASSWORD, USER, Certificates, SecureBroker
from tests.security.test_clients import sasl_settings


def _admin(secured: SecureBroker, certificates: Certificates) -> AdminClient:
    return AdminClient({"bootstrap.servers": secured.bootstrap("SASL_SSL"),
                        **sasl_settings("SASL_SSL", "SCRAM-SHA-512", certificates)})


def test_users_are_added_described_and_deleted_through_the_admin_api(
        secured: SecureBroker, certificates: Certificates) -> None:
    admin = _admin(secured, certificates)
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", sha256, b"bob-secret")]).values():
        future.result(15)
    described = admin.describe_user_scram_credentials(["bob", USER])
    bob = described["bob"].result(15).scram_credential_infos
    assert [(info.mechanism, info.iterations) for info in bob] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)]
    assert described[USER].result(15).scram_credential_infos[0].mechanism == \
        ScramMechanism.SCRAM_SHA_512
    round_trip_in_a_group(secured.bootstrap("SASL_SSL"), 5, settings=sasl_settings(
        "SASL_SSL", "SCRAM-SHA-256", certificates, user="bob", password="bob-secret"))
    stored = (Path(secured.broker.data_dir) / "meta" / "scram_credentials.json").read_text()
    assert "bob-secret" not in stored and set(json.loads(stored)["users"]) == {USER, "bob"}

    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)]).values():
        future.result(15)
    with pytest.raises(KafkaException) as gone:
        admin.describe_user_scram_credentials(["bob"])["bob"].result(15)
    assert gone.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    too_few = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000)
    with pytest.raises(KafkaException) as refused:
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("carol", too_few, b"x")])["carol"].result(15)
    assert refused.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL


def test_bmq_user_add_refuses_a_data_directory_a_broker_runs_on(secured: SecureBroker) -> None:
    result = subprocess.run(
        [*bmq_command(), "user", "add", "dave", "--password-stdin",
         "--data-dir", secured.broker.data_dir], input=PASSWORD + "\n", text=True,
        capture_output=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "AlterUserScramCredentials" in result.stderr and "Traceback" not in result.stderr
    assert "dave" not in (Path(secured.broker.data_dir) / "meta" /
                          "scram_credentials.json").read_text()
