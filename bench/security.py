"""Security for the benchmark: a spawned `bmq serve` with an SSL or SASL_SSL listener beside its
PLAINTEXT one (certificates made with the openssl command, a SCRAM user made with `bmq user
add`), the client settings that reach it, and the PLAINTEXT-vs-secured comparison of one run
(issue 16's bar: TLS at least 60% of plaintext MB/s)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any

from bench.stats import PhaseResult

PROTOCOLS = ("ssl", "sasl_ssl")
USER, PASSWORD, MECHANISM = "bench", "bench-secret", "SCRAM-SHA-512"


class SecuritySetupError(RuntimeError):
    """openssl or `bmq user add` failed."""


def _run(argv: list[str], stdin: str | None = None) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True, input=stdin, timeout=120)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        detail = getattr(error, "stderr", "") or error
        raise SecuritySetupError(f"{argv[0]} {argv[1]} failed: {detail}") from error


@dataclass(frozen=True)
class SecureSetup:
    """What the spawned server is started with and what clients of its secured listener use."""

    protocol: str                       # "SSL" or "SASL_SSL"
    port: int
    config_path: str                    # TOML with listeners and TLS settings
    client: dict[str, Any]              # librdkafka settings for the secured listener


def prepare(directory: str, protocol: str, plaintext_port: int, secure_port: int,
            data_dir: str, bmq: list[str]) -> SecureSetup:
    """Certificates (a CA and a server certificate for 127.0.0.1), the server's config file and,
    for SASL_SSL, the SCRAM user in ``data_dir``."""
    protocol = protocol.upper()
    ca_key, ca = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.crt")
    key, csr, cert = (os.path.join(directory, f"server.{ext}") for ext in ("key", "csr", "crt"))
    ext = os.path.join(directory, "server.ext")
    with open(ext, "w") as file:
        file.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
          "-out", ca, "-days", "2", "-subj", "/CN=bmq bench CA"])
    _run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
          "-subj", "/CN=localhost"])
    _run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
          "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext])
    keystore = os.path.join(directory, "server.pem")
    with open(keystore, "w") as out, open(key) as key_file, open(cert) as cert_file:
        out.write(key_file.read() + cert_file.read())
    config_path = os.path.join(directory, "security.toml")
    with open(config_path, "w") as file:
        file.write(f'listeners = "PLAINTEXT://127.0.0.1:{plaintext_port},'
                   f'{protocol}://127.0.0.1:{secure_port}"\n'
                   f'"ssl.keystore.location" = "{keystore}"\n'
                   f'"sasl.enabled.mechanisms" = "{MECHANISM}"\n')
    client: dict[str, Any] = {"security.protocol": protocol, "ssl.ca.location": ca}
    if protocol == "SASL_SSL":
        _run([*bmq, "user", "add", USER, "--mechanism", MECHANISM, "--password-stdin",
              "--data-dir", data_dir], stdin=PASSWORD + "\n")
        client.update({"sasl.mechanism": MECHANISM, "sasl.username": USER,
                       "sasl.password": PASSWORD})
    return SecureSetup(protocol, secure_port, config_path, client)


def compare(plaintext: list[PhaseResult], secured: list[PhaseResult], protocol: str) -> None:
    """Name each phase by its listener and note the secured MB/s as a share of plaintext's."""
    for result in plaintext:
        result.phase = f"{result.phase} (PLAINTEXT)"
    by_phase = {result.phase.split(" ")[0]: result for result in plaintext}
    for result in secured:
        base = by_phase.get(result.phase)
        result.phase = f"{result.phase} ({protocol})"
        if base is not None and base.mb_per_s > 0:
            share = 100 * result.mb_per_s / base.mb_per_s
            result.notes.append(f"{protocol} {result.mb_per_s:.1f} MB/s = {share:.0f}% of "
                                f"PLAINTEXT's {base.mb_per_s:.1f} MB/s in the same run")
            result.extra["share_of_plaintext"] = round(share / 100, 3)
