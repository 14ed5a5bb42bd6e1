"""Fuzzed SASL and TLS handshakes (issue #16): no crash, every other client keeps working.

Against one `bmq serve` with SSL, SASL_SSL (SCRAM) and SASL_PLAINTEXT (PLAIN and OAUTHBEARER)
listeners, hypothesis sends random bytes and mutated ClientHellos to the TLS ports, garbage
SaslAuthenticate bytes after a valid SaslHandshake, malformed SCRAM client-first and
client-final messages (bad base64, a wrong nonce, huge attribute values, missing attributes),
PLAIN messages with the wrong separators, OAUTHBEARER tokens the issuer signed with any claim
values, oversized frames and requests before authentication. Meanwhile a confluent-kafka
producer authenticated with SCRAM over SASL_SSL and a consumer authenticated with PLAIN over
SASL_PLAINTEXT keep producing and consuming; at the end every message they sent was delivered
and read, the broker is still running and its log holds no traceback. Each fuzz test runs
``EXAMPLES`` examples (more with BMQ_SLOW_TESTS=1, `make test-slow`), derandomized so a run is
repeatable.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import socket
import ssl
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import BrokerFactory
from tests.integration.helpers import create_topic
from tests.integration.kwire import (
    Disconnected,
    KafkaWire,
    Reader,
    i32,
    nbytes,
    request_frame,
    string,
)
from tests.security.conftest import (
    PASSWORD,
    USER,
    Certificates,
    SecureBroker,
    add_user,
    oauth_settings,
    secure_broker,
)
from tests.security.test_clients import sasl_settings
from tests.security.tokens import AUDIENCE, ISSUER, Issuer, client_message

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
NONE, SASL_AUTHENTICATION_FAILED = 0, 58
MAX_REQUEST_BYTES = 104_857_600       # socket.request.max.bytes, the default
EXAMPLES = 2000 if os.environ.get("BMQ_SLOW_TESTS") else 150
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
SCRAM = [("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512")]
MECHANISMS = [("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "OAUTHBEARER"), *SCRAM]
TLS_LISTENERS = ["SSL", "SASL_SSL"]
LISTENERS = ["SSL", "SASL_SSL", "SASL_PLAINTEXT"]


class _Traffic:
    """A producer (SCRAM over SASL_SSL) and a consumer (PLAIN over SASL_PLAINTEXT) of one
    topic, working on a thread of their own while the fuzz tests run."""

    def __init__(self, secured: SecureBroker, certificates: Certificates) -> None:
        self.topic = f"fuzz-traffic-{uuid.uuid4().hex[:6]}"
        create_topic(secured.bootstrap("PLAINTEXT"), self.topic)
        self._producer = Producer({
            "bootstrap.servers": secured.bootstrap("SASL_SSL"), "acks": "all", "linger.ms": 5,
            **sasl_settings("SASL_SSL", "SCRAM-SHA-512", certificates)})
        self._consumer = Consumer({
            "bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"), "group.id": self.topic,
            **sasl_settings("SASL_PLAINTEXT", "PLAIN", certificates)})
        self._consumer.assign([TopicPartition(self.topic, 0, 0)])
        self.sent = 0
        self.delivered: set[bytes] = set()
        self.received: set[bytes] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error: KafkaError | None, message: object) -> None:
        if error is not None:
            self.errors.append(f"delivery: {error}")
        else:
            self.delivered.add(message.value())  # type: ignore[attr-defined]

    def _consume(self, timeout: float) -> None:
        message = self._consumer.poll(timeout)
        if message is None:
            return
        if message.error() is not None:
            self.errors.append(f"consume: {message.error()}")
        else:
            self.received.add(message.value())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._producer.produce(self.topic, f"m{self.sent}".encode(),
                                   on_delivery=self._delivered)
            self.sent += 1
            self._producer.poll(0)
            self._consume(0.02)

    def finish(self, timeout: float = 60) -> None:
        """Stop producing; every message sent is delivered and read back."""
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(timeout) == 0
        deadline = time.monotonic() + timeout
        while not self.delivered <= self.received and time.monotonic() < deadline:
            self._consume(0.2)
        self._consumer.close()
        assert not self.errors, self.errors[:5]
        assert len(self.delivered) == self.sent > 0
        assert self.delivered <= self.received


@dataclass
class Fuzzed:
    secured: SecureBroker
    certificates: Certificates
    issuer: Issuer
    traffic: _Traffic


@pytest.fixture(scope="module")
def fuzzed(module_broker_factory: BrokerFactory, certificates: Certificates,
           issuer: Issuer) -> Iterator[Fuzzed]:
    # SASL_PLAINTEXT serves OAUTHBEARER (tokens of ``issuer``) beside PLAIN.
    secured = secure_broker(module_broker_factory, certificates, **oauth_settings(issuer))
    secured.broker.stop()       # alice has a SCRAM-SHA-512 credential; SHA-256 too, then
    add_user(secured.broker.data_dir, USER, PASSWORD, "SCRAM-SHA-256")
    secured.broker.start()
    yield Fuzzed(secured, certificates, issuer, _Traffic(secured, certificates))


# ----------------------------------------------------------------------------- connections

def _tls_context(certificates: Certificates) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certificates.ca))
    context.check_hostname = False
    return context


def _connect(fuzzed: Fuzzed, listener: str) -> KafkaWire:
    """A connection to ``listener``, through TLS on a TLS listener."""
    wire = KafkaWire(fuzzed.secured.bootstrap(listener))
    if listener in TLS_LISTENERS:
        wire.sock = _tls_context(fuzzed.certificates).wrap_socket(wire.sock)
    return wire


def _raw(fuzzed: Fuzzed, listener: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", fuzzed.secured.ports[listener]), timeout=5)


def _send_and_close(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data``, end our side and read until the broker closes; what it sent."""
    received = b""
    with contextlib.suppress(ConnectionResetError, BrokenPipeError):
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _handshake(wire: KafkaWire, mechanism: str) -> int:
    return Reader(wire.request(SASL_HANDSHAKE, 1, string(mechanism))).i16()


def _authenticate(wire: KafkaWire, auth_bytes: bytes, version: int = 1) -> tuple[int, bytes]:
    """SaslAuthenticate v0 or v1: (error code, the broker's bytes)."""
    reader = Reader(wire.request(SASL_AUTHENTICATE, version, nbytes(auth_bytes)))
    error = reader.i16()
    reader.string()
    return error, reader.nbytes() or b""


def _closed(wire: KafkaWire) -> bytes:
    """Wait for the broker to close the connection (a TLS one may end without close_notify);
    what it sent first."""
    try:
        return wire.wait_disconnect()
    except ssl.SSLError:
        return b""


def _refused(wire: KafkaWire, error: int) -> None:
    """A failed step is answered SASL_AUTHENTICATION_FAILED and the connection closes."""
    assert error == SASL_AUTHENTICATION_FAILED
    assert _closed(wire) == b""


def _client_hello() -> bytes:
    """A real TLS ClientHello (Python's, through memory BIOs)."""
    outgoing = ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), outgoing,
                                                server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


CLIENT_HELLO = _client_hello()


# ----------------------------------------------------------------------------- TLS

@FUZZ
@given(listener=st.sampled_from(TLS_LISTENERS), record_header=st.booleans(),
       data=st.binary(max_size=4096))
def test_random_bytes_on_a_tls_port(fuzzed: Fuzzed, listener: str, record_header: bool,
                                    data: bytes) -> None:
    # Half of them start as a TLS handshake record would, so they reach the TLS parser.
    with _raw(fuzzed, listener) as sock:
        received = _send_and_close(sock, (b"\x16\x03\x01" if record_header else b"") + data)
    assert received == b"" or received[0] == 0x15, received[:16]     # a TLS alert at most


@FUZZ
@given(listener=st.sampled_from(TLS_LISTENERS), cut=st.integers(0, len(CLIENT_HELLO)),
       flips=st.lists(st.tuples(st.integers(0, len(CLIENT_HELLO) - 1), st.integers(0, 255)),
                      max_size=6))
def test_truncated_and_mutated_client_hellos(fuzzed: Fuzzed, listener: str, cut: int,
                                             flips: list[tuple[int, int]]) -> None:
    hello = bytearray(CLIENT_HELLO)
    for position, value in flips:
        hello[position] = value
    with _raw(fuzzed, listener) as sock:
        _send_and_close(sock, bytes(hello[:cut]))


# ----------------------------------------------------------------------------- SASL framing

@FUZZ
@given(mechanism=st.sampled_from(MECHANISMS), auth=st.binary(max_size=1024),
       version=st.sampled_from([0, 1]))
@example(mechanism=MECHANISMS[0], auth=b"\0" * (8 << 20), version=1)   # 8 MiB of separators
@example(mechanism=SCRAM[1], auth=b"n,,n=alice,r" + b"x" * (8 << 20), version=1)  # no "="
def test_garbage_sasl_authenticate_after_a_valid_handshake(
        fuzzed: Fuzzed, mechanism: tuple[str, str], auth: bytes, version: int) -> None:
    listener, name = mechanism
    with _connect(fuzzed, listener) as wire:
        assert _handshake(wire, name) == NONE
        error, _ = _authenticate(wire, auth, version)
        _refused(wire, error)


@FUZZ
@given(listener=st.sampled_from(LISTENERS), handshake=st.booleans(),
       frame=st.binary(max_size=512))
def test_garbage_frames_before_and_after_the_handshake(
        fuzzed: Fuzzed, listener: str, handshake: bool, frame: bytes) -> None:
    with _connect(fuzzed, listener) as wire:
        if handshake and listener != "SSL":
            assert _handshake(wire, "PLAIN" if listener == "SASL_PLAINTEXT"
                              else "SCRAM-SHA-512") == NONE
        _send_and_close(wire.sock, i32(len(frame)) + frame)


@FUZZ
@given(listener=st.sampled_from(LISTENERS), handshake=st.booleans(),
       size=st.integers(MAX_REQUEST_BYTES + 1, 2**31 - 1) | st.integers(-2**31, -1),
       follow=st.binary(max_size=256))
def test_oversized_and_negative_frame_sizes_disconnect(
        fuzzed: Fuzzed, listener: str, handshake: bool, size: int, follow: bytes) -> None:
    with _connect(fuzzed, listener) as wire:
        if handshake and listener != "SSL":
            assert _handshake(wire, "PLAIN" if listener == "SASL_PLAINTEXT"
                              else "SCRAM-SHA-512") == NONE
        wire.send_raw(struct.pack(">i", size) + follow)
        assert _closed(wire) == b""


@FUZZ
@given(listener=st.sampled_from(["SASL_SSL", "SASL_PLAINTEXT"]),
       api_key=st.integers(0, 80).filter(lambda k: k not in (SASL_HANDSHAKE, API_VERSIONS)),
       version=st.integers(0, 15), body=st.binary(max_size=256))
def test_requests_before_authentication_are_never_answered(
        fuzzed: Fuzzed, listener: str, api_key: int, version: int, body: bytes) -> None:
    with _connect(fuzzed, listener) as wire:
        wire.send_raw(request_frame(api_key, version, 1, body))
        assert _closed(wire) == b""


@FUZZ
@given(steps=st.lists(st.sampled_from(["valid", "garbage", "handshake", "api versions"]),
                      min_size=2, max_size=5))
def test_pipelined_sasl_steps(fuzzed: Fuzzed, steps: list[str]) -> None:
    """Steps sent without waiting for their answers (they may run at once on the broker's
    threads): each is answered in order with a SASL error or success, or the connection
    closes; it is never left hanging."""
    frames = {"valid": (SASL_AUTHENTICATE, nbytes(f"\0{USER}\0{PASSWORD}".encode())),
              "garbage": (SASL_AUTHENTICATE, nbytes(b"\0nobody\0x")),
              "handshake": (SASL_HANDSHAKE, string("PLAIN")), "api versions": (API_VERSIONS, b"")}
    with _connect(fuzzed, "SASL_PLAINTEXT") as wire:
        assert _handshake(wire, "PLAIN") == NONE
        wire.send_raw(b"".join(request_frame(frames[step][0], 1, 100 + i, frames[step][1])
                               for i, step in enumerate(steps)))
        wire.sock.settimeout(10)
        for i in range(len(steps)):
            try:
                answer = wire.recv_frame()
            except Disconnected:
                return
            assert struct.unpack_from(">i", answer)[0] == 100 + i


# ----------------------------------------------------------------------------- PLAIN

@FUZZ
@given(parts=st.lists(st.sampled_from(["", USER, PASSWORD, "bob", "a=alice"])
                      | st.text(max_size=12), max_size=5),
       separators=st.lists(st.sampled_from(["\0", ",", ":", "\0\0", " ", "", "\n"]),
                           min_size=4, max_size=4))
def test_plain_messages_with_wrong_separators(fuzzed: Fuzzed, parts: list[str],
                                              separators: list[str]) -> None:
    auth = "".join(part + sep for part, sep in zip(parts, [*separators, ""],
                                                   strict=False)).encode()
    with _connect(fuzzed, "SASL_PLAINTEXT") as wire:
        assert _handshake(wire, "PLAIN") == NONE
        error, _ = _authenticate(wire, auth)
        if auth in (f"\0{USER}\0{PASSWORD}".encode(), f"{USER}\0{USER}\0{PASSWORD}".encode()):
            assert error == NONE                  # the right message, however it was drawn
        else:
            _refused(wire, error)


# ----------------------------------------------------------------------------- SCRAM

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _attributes(message: bytes) -> dict[str, str]:
    return dict(part.split("=", 1) for part in message.decode().split(","))


def _proof(mechanism: str, server_first: bytes, client_first_bare: str,
           without_proof: str) -> bytes:
    """RFC 5802's ClientProof for alice's password, from the server-first-message."""
    digest = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    found = _attributes(server_first)
    salted = hashlib.pbkdf2_hmac(digest, PASSWORD.encode(), base64.b64decode(found["s"]),
                                 int(found["i"]))
    client_key = hmac.digest(salted, b"Client Key", digest)
    auth_message = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(digest, client_key).digest(), auth_message, digest)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


HUGE = "9" * 5000
# What may be done to a client-first-message and a client-final-message. None leaves it
# valid, and so does an unknown attribute at the end (RFC 5802's extensions), here a huge
# iteration count: the server ignores it (the count is the server's to say).
VALID = (None, "huge iteration count")
FIRST_MUTATIONS = [None, "no gs2 header", "channel binding", "other authzid", "no n=", "no r=",
                   "m= extension", "huge iteration count", "unknown user", "bad utf-8",
                   "empty", "attribute without =", "long key"]
FINAL_MUTATIONS = [None, "bad base64", "wrong nonce", "client nonce only", "no c=", "no p=",
                   "huge iteration count", "short proof", "wrong proof", "bad utf-8",
                   "huge proof"]


def _client_first(mutation: str | None, nonce: str) -> tuple[bytes, str]:
    """(client-first-message, its bare part) with one mutation."""
    user = "nobody" if mutation == "unknown user" else USER
    attributes = [("n", user), ("r", nonce)]
    if mutation == "no n=":
        attributes = attributes[1:]
    elif mutation == "no r=":
        attributes = attributes[:1]
    elif mutation == "m= extension":
        attributes.insert(0, ("m", "ext"))
    elif mutation == "huge iteration count":
        attributes.append(("i", HUGE))
    bare = ",".join(f"{key}={value}" for key, value in attributes)
    if mutation == "attribute without =":
        bare += ",x"
    elif mutation == "long key":
        bare += ",nonce=1"
    gs2 = {"no gs2 header": "", "channel binding": "p=tls-unique,,",
           "other authzid": "n,a=bob,"}.get(mutation or "", "n,,")
    message = (gs2 + bare).encode()
    if mutation == "bad utf-8":
        message += b"\xff\xfe"
    elif mutation == "empty":
        message = b""
    return message, bare


def _client_final(mutation: str | None, mechanism: str, server_first: bytes,
                  client_first_bare: str, client_nonce: str) -> bytes:
    nonce = _attributes(server_first)["r"]
    if mutation == "wrong nonce":
        nonce = nonce[:-4] + "AAAA"
    elif mutation == "client nonce only":
        nonce = client_nonce
    parts = [] if mutation == "no c=" else [f"c={_b64(b'n,,')}"]
    parts.append(f"r={nonce}")
    if mutation == "huge iteration count":
        parts.append(f"i={HUGE}")
    without_proof = ",".join(parts)
    proof = _b64(_proof(mechanism, server_first, client_first_bare, without_proof))
    proof = {"bad base64": "!!not*base64", "short proof": _b64(b"short"),
             "wrong proof": _b64(bytes(len(base64.b64decode(proof)))),
             "huge proof": _b64(os.urandom(64)) * 200}.get(mutation or "", proof)
    message = without_proof if mutation == "no p=" else f"{without_proof},p={proof}"
    return message.encode() + (b"\xc3\x28" if mutation == "bad utf-8" else b"")


@FUZZ
@given(mechanism=st.sampled_from(SCRAM), first=st.sampled_from(FIRST_MUTATIONS),
       final=st.sampled_from(FINAL_MUTATIONS),
       nonce=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e,
                                   exclude_characters=","), min_size=1, max_size=64))
def test_malformed_scram_messages(fuzzed: Fuzzed, mechanism: tuple[str, str],
                                  first: str | None, final: str | None, nonce: str) -> None:
    listener, name = mechanism
    with _connect(fuzzed, listener) as wire:
        assert _handshake(wire, name) == NONE
        client_first, bare = _client_first(first, nonce)
        error, server_first = _authenticate(wire, client_first)
        if first not in VALID:
            _refused(wire, error)
            return
        assert error == NONE and server_first.startswith(f"r={nonce}".encode())
        error, server_final = _authenticate(
            wire, _client_final(final, name, server_first, bare, nonce))
        if final not in VALID:
            _refused(wire, error)
            return
        assert error == NONE and server_final.startswith(b"v=")


# ----------------------------------------------------------------------------- OAUTHBEARER

# Claim values of every JSON kind, and numbers of any size: the issuer signs whatever it is
# given, so these reach the claim checks behind the signature.
CLAIM = (st.integers(-2**80, 2**80) | st.integers(10**300, 10**400)
         | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8) | st.none()
         | st.booleans() | st.lists(st.integers(), max_size=2))


@FUZZ
@given(claims=st.dictionaries(st.sampled_from(["exp", "iat", "nbf", "sub", "aud", "iss"]),
                              CLAIM, max_size=3),
       future_exp=st.integers(60, 2**80), kid=st.sampled_from(["rsa-1", "ec-1"]),
       framing=st.sampled_from([None, "no kvsep", "no bearer", "p gs2", "bad authzid"]))
def test_signed_oauthbearer_tokens_with_any_claims(
        fuzzed: Fuzzed, claims: dict[str, object], future_exp: int, kid: str,
        framing: str | None) -> None:
    """Tokens the issuer signed, with any claim values (an exp far in the future among them):
    each is accepted (the connection is then served) or refused with Kafka's error challenge
    and then SASL_AUTHENTICATION_FAILED; a malformed message fails at once."""
    now = int(time.time())
    payload = {"sub": USER, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + future_exp,
               **claims}
    # Signed as they are (PyJWT's jwt.encode would refuse some of them before signing).
    alg, key = fuzzed.issuer.keys[kid]
    token = jwt.api_jws.encode(json.dumps(payload).encode(), key, algorithm=alg,
                               headers={"kid": kid})
    message = client_message(token)
    if framing == "no kvsep":
        message = message.replace(b"\x01", b",")
    elif framing == "no bearer":
        message = message.replace(b"Bearer ", b"")
    elif framing == "p gs2":
        message = b"p=x" + message[1:]
    elif framing == "bad authzid":
        message = b"n,alice" + message[2:]
    with _connect(fuzzed, "SASL_PLAINTEXT") as wire:
        assert _handshake(wire, "OAUTHBEARER") == NONE
        error, challenge = _authenticate(wire, message)
        if framing is not None:
            _refused(wire, error)
            return
        assert error == NONE
        if challenge:
            assert challenge == b'{"status":"invalid_token"}'
            error, _ = _authenticate(wire, b"\x01")
            _refused(wire, error)
        else:       # accepted: the connection is served
            assert API_VERSIONS in wire.api_versions()


# ----------------------------------------------------------------------------- the rest

def test_every_other_client_kept_working(fuzzed: Fuzzed) -> None:
    """Runs last (pytest keeps file order): the clients authenticated before and during the
    fuzzing delivered and read everything, and the broker neither died nor logged a
    traceback."""
    fuzzed.traffic.finish()
    broker = fuzzed.secured.broker
    assert broker.is_running()
    assert "Traceback" not in broker.log_text()
