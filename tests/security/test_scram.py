"""SCRAM as RFC 5802/7677 define it: RFC 7677's worked SCRAM-SHA-256 exchange byte for byte, and
SCRAM-SHA-512 with a client written here from the RFC (a wrong password is refused)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from bmq.security.scram import (
    ScramError,
    ScramExchange,
    credential_from_salted,
    make_credential,
    password_matches,
    salted_password,
)


def test_rfc_7677_example() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = credential_from_salted(
        "SCRAM-SHA-256", salt, salted_password("SCRAM-SHA-256", b"pencil", salt, 4096), 4096)
    exchange = ScramExchange("SCRAM-SHA-256")
    assert exchange.client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == "user"
    server_first = exchange.server_first(credential, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert server_first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = exchange.client_final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _client_final(server_first: bytes, client_first_bare: str, password: str) -> bytes:
    attributes = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(attributes["s"]),
                                 int(attributes["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    without_proof = f"c=biws,r={attributes['r']}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha512(client_key).digest(), auth, "sha512")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize(("password", "accepted"), [("right", True), ("wrong", False)])
def test_scram_sha_512_exchange(password: str, accepted: bool) -> None:
    credential = make_credential("SCRAM-SHA-512", "right", iterations=4096)
    assert password_matches(credential, b"right") and not password_matches(credential, b"wrong")
    exchange = ScramExchange("SCRAM-SHA-512")
    bare = "n=us=3Der=2C1,r=client-nonce"
    assert exchange.client_first(f"n,,{bare}".encode()) == "us=er,1"
    final = _client_final(exchange.server_first(credential), bare, password)
    if accepted:
        assert exchange.client_final(final).startswith(b"v=")
    else:
        with pytest.raises(ScramError, match="invalid proof"):
            exchange.client_final(final)


@pytest.mark.parametrize("message", [b"", b"p=tls-unique,,n=a,r=x", b"n,,r=x", b"n,a=bob,n=a,r=x",
                                     b"n,,n=a,r=x,m=ext", b"\xff\xfe"])
def test_malformed_client_first_messages_are_refused(message: bytes) -> None:
    with pytest.raises((ScramError, UnicodeDecodeError)):
        ScramExchange("SCRAM-SHA-256").client_first(message)
