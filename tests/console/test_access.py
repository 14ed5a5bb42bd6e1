"""Sign-in and the Access pages against a real `bmq serve` with SCRAM and ACLs on: the console
logs in as its own principal, users sign in (SCRAM users of the cluster, the console's own
users), and ACLs, SCRAM users and quotas changed in Chromium are seen by other clients
(confluent-kafka's AdminClient, a raw DescribeClientQuotas); a user the cluster refuses, a
viewer, a wrong password and a form without its token change nothing."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from playwright.sync_api import Browser, Page, expect

from bmq.console.auth import add_user as add_console_user
from bmq.metadata.quotas import USER
from bmq.protocol.messages import DescribeClientQuotasRequest
from bmq.startup import ExitCode
from tests.conftest import BrokerFactory, BrokerProcess, bmq_command, free_port
from tests.console.conftest import ConsoleProcess
from tests.groups.wire import RawClient
from tests.security.conftest import Certificates, certificates  # noqa: F401 (a fixture)

ADMIN, BOB, SECRET = "admin", "bob", "cluster-secret"
OPS, WATCHER, GUESSED, CONSOLE_SECRET = "ops", "watcher", "guessed", "console-secret"
MECHANISM = "SCRAM-SHA-512"


@pytest.fixture(scope="module")
def acl_broker(module_broker_factory: BrokerFactory) -> tuple[BrokerProcess, str]:
    """`bmq serve` with ACLs: PLAINTEXT (ANONYMOUS, a super user: the tests' observer) and
    SASL_PLAINTEXT with SCRAM (admin, a super user; bob, no ACL at all)."""
    plain, sasl = free_port(), free_port()
    broker = module_broker_factory(config={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": MECHANISM,
        "authorizer.class.name": "bmq", "super.users": "User:admin;User:ANONYMOUS",
    }, port=plain)
    # Made over the wire by the observer (a super user): quicker than `bmq user add` before
    # the start, a process each.
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(
        ScramMechanism.SCRAM_SHA_512, 4096), SECRET.encode()) for user in (ADMIN, BOB)]
    admin = observer(broker)
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(30)
    return broker, f"127.0.0.1:{sasl}"


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The console's users, written as `--add-user` writes them (its command line is
    test_without_sign_in_it_listens_on_loopback_only's)."""
    path = tmp_path_factory.mktemp("console-users") / "users.json"
    for name, role in ((OPS, "admin"), (WATCHER, "viewer"), (GUESSED, "viewer")):
        add_console_user(path, name, CONSOLE_SECRET, role)
    return path


@pytest.fixture(scope="module")
def secured_console(acl_broker: tuple[BrokerProcess, str], users_file: Path,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    _, sasl = acl_broker
    process = ConsoleProcess(
        tmp_path_factory.mktemp("console"), sasl,
        "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={MECHANISM}",
        "-X", f"sasl.username={ADMIN}", "-X", f"sasl.password={SECRET}",
        "--scram-sign-in", MECHANISM, "--users", str(users_file))
    yield process
    process.stop()


def sign_in(page: Page, console: ConsoleProcess | str, user: str, password: str,
            path: str = "/cluster") -> None:
    """Opens ``path`` of ``console`` (or the URL ``console``), is sent to the sign-in page,
    and signs in there."""
    page.goto(console if isinstance(console, str) else console.url(path))
    expect(page).to_have_url(re.compile(r".*/sign-in.*"))
    page.fill("#user", user)
    page.fill("#password", password)
    page.click("#sign-in button[type=submit]")


def observer(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def acls_of(broker: BrokerProcess, principal: str) -> list[Any]:
    admin = observer(broker)
    matching = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,  # type: ignore[arg-type]
                                principal, None, AclOperation.ANY,  # type: ignore[arg-type]
                                AclPermissionType.ANY)
    return list(admin.describe_acls(matching).result(30))


def csrf_token(page: Page) -> str:
    return str(page.locator("input[name=csrf_token]").first.get_attribute("value"))


def test_a_cluster_user_signs_in_and_edits_acls_bob_is_refused(
        acl_broker: tuple[BrokerProcess, str], secured_console: ConsoleProcess, page: Page,
        screenshot: Callable[[str], Path]) -> None:
    broker, _ = acl_broker
    principal = f"User:reader-{uuid.uuid4().hex[:6]}"
    # Not signed in: every page leads to the sign-in page. A wrong password is refused.
    page.goto(secured_console.url("/topics"))
    expect(page).to_have_url(secured_console.url("/sign-in?next=/topics"))
    screenshot("sign-in")
    sign_in(page, secured_console, ADMIN, "not-the-password")
    expect(page.locator(".error")).to_contain_text("unknown user or wrong password")
    screenshot("sign-in-refused")
    page.fill("#password", SECRET)
    page.click("#sign-in button[type=submit]")
    expect(page).to_have_url(secured_console.url("/cluster"))
    expect(page.locator("nav .user")).to_have_text("admin (cluster user)")
    [session] = [c for c in page.context.cookies() if c["name"] == "bmq_console_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert not session["secure"]    # served over HTTP here; --tls-cert makes it Secure

    page.goto(secured_console.url("/access/acls"))
    form = page.locator("#create-acl")
    form.locator("input[name=principal]").fill(principal)
    form.locator("select[name=operation]").select_option("READ")
    form.locator("select[name=resource_type]").select_option("TOPIC")
    form.locator("input[name=name]").fill("orders")
    form.locator("select[name=pattern]").select_option("PREFIXED")
    form.locator("button").click()
    expect(page.locator(".notice")).to_have_text("created the ACL")
    expect(page.locator(f"#acls tr[data-principal='{principal}']")).to_have_count(1)
    screenshot("access-acls")
    [created] = acls_of(broker, principal)
    assert (created.name, created.resource_pattern_type, created.operation) == \
        ("orders", ResourcePatternType.PREFIXED, AclOperation.READ)
    # The same form without its CSRF token (as another site would post it): refused.
    forged = page.request.post(secured_console.url("/access/acls/delete"), form={
        "principal": principal, "permission": "ALLOW", "operation": "READ",
        "resource_type": "TOPIC", "name": "orders", "pattern": "PREFIXED", "host": "*"},
        max_redirects=0)
    assert forged.status == 403 and "security token did not match" in forged.text()
    assert len(acls_of(broker, principal)) == 1
    page.locator(f"#acls tr[data-principal='{principal}'] button").click()
    expect(page.locator(".notice")).to_have_text("deleted 1 ACL(s)")
    expect(page.locator(f"#acls tr[data-principal='{principal}']")).to_have_count(0)
    assert acls_of(broker, principal) == []

    # bob (no ACL): the cluster refuses him the list and the create; nothing changes.
    page.click("nav form.sign-out button")
    sign_in(page, secured_console, BOB, SECRET, "/access/acls")
    expect(page.locator(".error")).to_contain_text("CLUSTER_AUTHORIZATION_FAILED")
    screenshot("access-acls-refused")
    answer = page.request.post(secured_console.url("/access/acls"), form={
        "csrf_token": csrf_token(page), "principal": "User:bob", "permission": "ALLOW",
        "operation": "ALL", "resource_type": "CLUSTER", "name": "", "pattern": "LITERAL",
        "host": "*"}, max_redirects=0)
    assert answer.status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in answer.text()
    assert acls_of(broker, "User:bob") == []


@pytest.mark.slow
def test_scram_users_and_quotas_edited_with_bad_input_refused(
        acl_broker: tuple[BrokerProcess, str], secured_console: ConsoleProcess, page: Page,
        screenshot: Callable[[str], Path]) -> None:
    broker, _ = acl_broker
    watcher = observer(broker)      # kept: a future outlived its AdminClient (_DESTROY)
    carol = f"carol-{uuid.uuid4().hex[:6]}"
    sign_in(page, secured_console, ADMIN, SECRET, "/access/users")
    form = page.locator("#upsert-user")
    form.locator("input[name=user]").fill(carol)
    form.locator("select[name=mechanism]").select_option(MECHANISM)
    form.locator("input[name=password]").fill("carol-secret")
    form.locator("input[name=iterations]").fill("12")
    form.locator("button").click()
    expect(page.locator(".error")).to_contain_text("iterations must be at least 4096")
    assert carol not in watcher.describe_user_scram_credentials().result(30)
    form.locator("input[name=iterations]").fill("8192")
    form.locator("input[name=password]").fill("carol-secret")
    form.locator("button").click()
    expect(page.locator(".notice")).to_contain_text(f"credentials of {carol}")
    screenshot("access-users")
    [info] = watcher.describe_user_scram_credentials([carol])[carol] \
        .result(30).scram_credential_infos
    assert info.iterations == 8192
    # carol's password works: she signs in to the console as a cluster user.
    page.click("nav form.sign-out button")
    sign_in(page, secured_console, carol, "carol-secret")
    expect(page.locator("nav .user")).to_have_text(f"{carol} (cluster user)")
    page.click("nav form.sign-out button")

    sign_in(page, secured_console, ADMIN, SECRET, "/access/quotas")
    form = page.locator("#set-quota")
    form.locator("input[name=entity_name]").fill(carol)
    form.locator("input[name=value]").fill("fast")
    form.locator("button").click()
    expect(page.locator(".error")).to_contain_text("must be a number")
    assert _quotas(broker) == {}
    form.locator("input[name=value]").fill("1048576")
    form.locator("button").click()
    expect(page.locator(".notice")).to_contain_text("set producer_byte_rate")
    screenshot("access-quotas")
    assert _quotas(broker) == {carol: 1048576.0}
    page.locator(f"#quotas tr[data-entity='user={carol}'] button").click()
    expect(page.locator(".notice")).to_contain_text("removed producer_byte_rate")
    assert _quotas(broker) == {}

    page.goto(secured_console.url("/access/acls"))
    page.locator("#create-acl input[name=principal]").fill(carol)     # no User: prefix
    page.locator("#create-acl input[name=name]").fill("orders")
    page.locator("#create-acl button").click()
    expect(page.locator(".error")).to_contain_text("principal must be TYPE:NAME")
    expect(page.locator("#create-acl input[name=name]")).to_have_value("orders")
    assert acls_of(broker, carol) == [] and acls_of(broker, f"User:{carol}") == []

    page.goto(secured_console.url("/access/users"))
    page.locator(f"#scram-users tr[data-user='{carol}'] button").click()
    expect(page.locator(".notice")).to_contain_text("deleted")
    assert carol not in watcher.describe_user_scram_credentials().result(30)


def _quotas(broker: BrokerProcess) -> dict[str, float]:
    """user -> producer byte rate of every user quota, asked on the wire (not by the console)."""
    with RawClient(broker.bootstrap) as client:
        answer = client.call(DescribeClientQuotasRequest(components=[]), 1)
    assert answer.error_code == 0, answer.error_message
    return {str(entry.entity[0].entity_name): value.value for entry in answer.entries or []
            for value in entry.values if entry.entity[0].entity_type == USER}


@pytest.mark.slow
def test_console_users_viewer_changes_nothing_and_forms_need_their_token(
        acl_broker: tuple[BrokerProcess, str], secured_console: ConsoleProcess, page: Page,
        screenshot: Callable[[str], Path]) -> None:
    broker, _ = acl_broker
    topic = f"viewer-{uuid.uuid4().hex[:6]}"
    # A sign-in form without its token: refused, no session.
    answer = page.request.post(secured_console.url("/sign-in"), form={
        "user": OPS, "password": CONSOLE_SECRET}, max_redirects=0)
    assert answer.status == 403 and "nothing was changed" in answer.text()
    assert not [c for c in page.context.cookies() if c["name"] == "bmq_console_session"]

    sign_in(page, secured_console, WATCHER, CONSOLE_SECRET, "/topics")
    expect(page.locator("nav .user")).to_have_text("watcher (viewer)")
    page.fill("#create-topic input[name=name]", topic)
    page.click("#create-topic button")
    expect(page.locator(".error")).to_contain_text("watcher is a viewer")
    assert topic not in observer(broker).list_topics(timeout=10).topics
    page.goto(secured_console.url("/access/acls"))
    expect(page.locator(".error")).to_contain_text("is a viewer of this console")
    assert page.locator("#create-acl").count() == 0
    screenshot("access-viewer-refused")
    page.click("nav form.sign-out button")

    # The console's admin acts as the console's principal (admin, a super user).
    sign_in(page, secured_console, OPS, CONSOLE_SECRET, "/access/acls")
    expect(page.locator("nav .user")).to_have_text("ops (admin)")
    expect(page.locator("#create-acl")).to_be_visible()
    # Signed out elsewhere (another tab), an open Cluster page's next poll (htmx, every 2 s)
    # goes to the sign-in page; the old session opens nothing.
    page.goto(secured_console.url("/cluster"))
    signed_out = page.request.post(secured_console.url("/sign-out"),
                                   form={"csrf_token": csrf_token(page)}, max_redirects=0)
    assert signed_out.status == 303
    expect(page).to_have_url(secured_console.url("/sign-in?next=/cluster"), timeout=10_000)
    page.goto(secured_console.url("/access/acls"))
    expect(page).to_have_url(re.compile(r".*/sign-in.*"))


def test_without_sign_in_it_listens_on_loopback_only(tmp_path: Path) -> None:
    result = subprocess.run([*bmq_command(), "console", "--listen", f"0.0.0.0:{free_port()}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == ExitCode.USAGE
    assert "without sign-in listens on loopback only" in result.stderr
    # --add-user keeps a scrypt hash, never the password, in a file only its owner reads.
    users = tmp_path / "users.json"
    subprocess.run([*bmq_command(), "console", "--users", str(users), "--add-user", OPS,
                    "--role", "admin"], input=CONSOLE_SECRET + "\n", text=True, check=True,
                   capture_output=True, timeout=60)
    stored = json.loads(users.read_text())["users"][OPS]
    assert stored["role"] == "admin" and stored["password"].startswith("scrypt$")
    assert CONSOLE_SECRET not in users.read_text()
    assert users.stat().st_mode & 0o077 == 0
    # A users file it cannot use stops the start, with the reason.
    stored["role"] = "root"
    users.write_text(json.dumps({"users": {OPS: stored}}))
    refused = subprocess.run([*bmq_command(), "console", "--users", str(users), "--listen",
                              f"127.0.0.1:{free_port()}"], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == ExitCode.USAGE
    assert "ops's role 'root' is not one of viewer, admin" in refused.stderr


@pytest.mark.slow
def test_over_https_the_session_cookie_is_secure(
        users_file: Path, certificates: Certificates, browser: Browser,  # noqa: F811 (the fixture imported above)
        tmp_path: Path) -> None:
    process = ConsoleProcess(tmp_path, "127.0.0.1:1", "--users", str(users_file), "--tls-cert",
                             str(certificates.server_cert), "--tls-key",
                             str(certificates.server_key), scheme="https")
    context = browser.new_context(ignore_https_errors=True)   # the test CA is not Chromium's
    try:
        page = context.new_page()
        sign_in(page, process, OPS, CONSOLE_SECRET, "/topics")
        expect(page.locator("nav .user")).to_have_text("ops (admin)")
        cookies = {c["name"]: c for c in context.cookies()}
        for name in ("bmq_console_session", "bmq_console_id"):
            assert cookies[name]["secure"] and cookies[name]["httpOnly"], name
            assert cookies[name]["sameSite"] == "Strict", name
    finally:
        context.close()
        process.stop()


@pytest.mark.slow
def test_an_open_console_of_a_cluster_without_an_authorizer(console: ConsoleProcess,
                                                            page: Page) -> None:
    page.goto(console.url("/access/acls"))
    expect(page.locator(".error")).to_contain_text("cannot list ACLs: SECURITY_DISABLED")
    page.goto(console.url("/sign-in"))
    expect(page.locator("main")).to_contain_text("This console has no sign-in")
    assert page.locator("#sign-in").count() == 0
    assert not [c for c in page.context.cookies() if c["name"] == "bmq_console_session"]


@pytest.mark.slow
def test_passwords_are_not_guessed_at_the_consoles_speed(secured_console: ConsoleProcess,
                                                         page: Page) -> None:
    page.goto(secured_console.url("/sign-in"))
    token = csrf_token(page)

    def attempt(user: str, password: str) -> str:
        answer = page.request.post(secured_console.url("/sign-in"), form={
            "csrf_token": token, "user": user, "password": password}, max_redirects=0)
        return f"{answer.status} {answer.text() if answer.status != 303 else ''}"

    for guess in range(5):
        assert "unknown user or wrong password" in attempt(GUESSED, f"guess-{guess}")
    # The sixth try, with the right password, is refused unchecked; another user is not.
    refused = attempt(GUESSED, CONSOLE_SECRET)
    assert refused.startswith("401") and "5 failed sign-ins of guessed from this address" in refused
    assert attempt(OPS, CONSOLE_SECRET).startswith("303")
