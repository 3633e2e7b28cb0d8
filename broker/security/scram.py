"""SASL/SCRAM (RFC 5802, RFC 7677) as Kafka speaks it: credentials, their ZooKeeper text form, both exchange sides.

Pure code: the broker passes SaslAuthenticate bytes to :meth:`ScramServer.evaluate` and sends back the result;
broker-to-broker links and tests drive :class:`ScramClient` the same way. Only the Kafka mechanisms
SCRAM-SHA-256 and SCRAM-SHA-512 are looked up by name; SCRAM-SHA-1 exists so the RFC 5802 test vector can be
checked. Passwords are used as plain UTF-8 (no SASLprep), like Kafka, so credentials made by Kafka's tools match.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Callable

DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
TOKEN_AUTH_EXTENSION = "tokenauth"
AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"


class ScramAuthenticationError(Exception):
    """The exchange failed; ``str(e)`` is what may be sent to the peer, ``detail`` is for the local log only."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail or message


class ScramIllegalStateError(Exception):
    """A message arrived when none (or a different one) was expected: Kafka's ILLEGAL_SASL_STATE."""


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM variant: its SASL name, the hash behind it and the iteration bounds Kafka enforces."""

    name: str
    hash_name: str
    min_iterations: int = DEFAULT_ITERATIONS
    max_iterations: int = 16384

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """RFC 5802 Hi(): PBKDF2-HMAC with one hash-sized block."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512")
SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1")  # RFC 5802 vectors only; never offered to clients
_KAFKA_MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
SCRAM_MECHANISM_NAMES = tuple(_KAFKA_MECHANISMS)


def scram_mechanism(name: str) -> ScramMechanism | None:
    """The Kafka SCRAM mechanism called ``name`` (exact SASL name), or None if Kafka has no such mechanism."""
    return _KAFKA_MECHANISMS.get(name)


def _mechanism(mechanism: ScramMechanism | str) -> ScramMechanism:
    if isinstance(mechanism, ScramMechanism):
        return mechanism
    found = scram_mechanism(mechanism)
    if found is None:
        raise ValueError(f"Unsupported SCRAM mechanism {mechanism!r}; use one of {', '.join(SCRAM_MECHANISM_NAMES)}")
    return found


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps per user and mechanism: enough to verify a proof, not to recover the password."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def from_password(cls, mechanism: ScramMechanism | str, password: str, salt: bytes | None = None,
                      iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
        """Derive the credential as RFC 5802 defines it (a random salt unless one is given)."""
        mech = _mechanism(mechanism)
        if iterations < 1:
            raise ValueError(f"SCRAM iterations must be positive, got {iterations}")
        salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
        salted = mech.salted_password(password, salt, iterations)
        client_key = mech.hmac(salted, b"Client Key")
        return cls(salt, mech.hash(client_key), mech.hmac(salted, b"Server Key"), iterations)


# --- Kafka's ZooKeeper text form: /config/users/<user> -> {"SCRAM-SHA-256": "salt=...,stored_key=...,..."} ---

_CREDENTIAL_KEYS = ("salt", "stored_key", "server_key", "iterations")


def format_credential(cred: ScramCredential) -> str:
    """The exact string Kafka's ScramCredentialUtils writes (standard base64, this key order)."""
    return (f"salt={_b64(cred.salt)},stored_key={_b64(cred.stored_key)},"
            f"server_key={_b64(cred.server_key)},iterations={cred.iterations}")


def parse_credential(text: str) -> ScramCredential:
    """Read a credential string written by Kafka or :func:`format_credential`; ValueError names what is wrong."""
    fields: dict[str, str] = {}
    for n, item in enumerate(text.split(","), 1):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"Invalid SCRAM credential: item {n} is not key=value")
        if key not in _CREDENTIAL_KEYS:
            raise ValueError(f"Invalid SCRAM credential: unknown key {key!r}")
        if key in fields:
            raise ValueError(f"Invalid SCRAM credential: duplicate key {key!r}")
        fields[key] = value
    missing = [k for k in _CREDENTIAL_KEYS if k not in fields]
    if missing:
        raise ValueError(f"Invalid SCRAM credential: missing {', '.join(missing)}")
    raw = {}
    for key in ("salt", "stored_key", "server_key"):
        decoded = _b64decode(fields[key])
        if not decoded:
            raise ValueError(f"Invalid SCRAM credential: {key} is not non-empty base64")
        raw[key] = decoded
    iterations = fields["iterations"]
    if not (iterations.isascii() and iterations.isdigit()) or int(iterations) < 1:
        raise ValueError("Invalid SCRAM credential: iterations is not a positive integer")
    return ScramCredential(raw["salt"], raw["stored_key"], raw["server_key"], int(iterations))


# --- shared message helpers ---

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64decode(text: str) -> bytes | None:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None


def _is_printable_nonce(nonce: str) -> bool:
    """RFC 5802 ``printable``: ASCII 0x21-0x7E except ','."""
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


def _new_nonce() -> str:
    return secrets.token_urlsafe(24)


def escape_saslname(name: str) -> str:
    """RFC 5802 saslname escaping: '=' -> '=3D', ',' -> '=2C'."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_saslname(text: str) -> str | None:
    """Inverse of :func:`escape_saslname`; None for an empty name, NUL, or an '=' not starting =2C / =3D."""
    if not text or "\x00" in text:
        return None
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i + 1:i + 3]
            if code not in ("2C", "3D"):
                return None
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


# --- server side ---

# Per-process key for fake salts: an unknown user always gets the same salt, so the salt does not reveal existence.
_FAKE_SALT_KEY = secrets.token_bytes(32)

CredentialLookup = Callable[[str], "ScramCredential | None"]
TokenLookup = Callable[[str], "tuple[ScramCredential, str] | None"]

_FIRST, _FINAL, _COMPLETE, _FAILED = "RECEIVE_CLIENT_FIRST_MESSAGE", "RECEIVE_CLIENT_FINAL_MESSAGE", "COMPLETE", "FAILED"


class ScramServer:
    """One server-side exchange: client-first -> server-first, client-final -> server-final.

    Unknown users (and unknown delegation tokens) get a fake but stable salt and the minimum iteration count, and
    fail at the final step with the same error as a wrong password, so the exchange does not reveal which users
    exist. ``server_nonce`` is for test vectors only.
    """

    def __init__(self, mechanism: ScramMechanism | str, credential_lookup: CredentialLookup,
                 token_lookup: TokenLookup | None = None, *, server_nonce: str | None = None) -> None:
        self.mechanism = _mechanism(mechanism)
        self._credential_lookup = credential_lookup
        self._token_lookup = token_lookup
        if server_nonce is not None and not _is_printable_nonce(server_nonce):
            raise ValueError("server nonce must be printable ASCII without ','")
        self._server_nonce = server_nonce
        self._state = _FIRST
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2_header = b""
        self._nonce = ""
        self._auth_prefix = ""
        self._sasl_name = ""
        self._owner = ""
        self._token = False
        self.extensions: dict[str, str] = {}
        self.complete = False
        self.username: str | None = None
        self.principal_name: str | None = None
        self.token_authenticated = False

    def _fail(self, detail: str) -> ScramAuthenticationError:
        return ScramAuthenticationError(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{self.mechanism.name}", detail)

    def evaluate(self, client_message: bytes) -> bytes:
        """Process the next client message and return the server's reply; raises on any failure."""
        if self._state == _FIRST:
            step = self._client_first
        elif self._state == _FINAL:
            step = self._client_final
        else:
            raise ScramIllegalStateError(f"Unexpected SASL/SCRAM message in server state {self._state}")
        try:
            return step(client_message)
        except BaseException:
            self._state, self._credential = _FAILED, None
            raise

    def _decode(self, message: bytes) -> str:
        try:
            return message.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("SCRAM message is not valid UTF-8") from None

    def _client_first(self, message: bytes) -> bytes:
        text = self._decode(message)
        if text.startswith("c="):
            raise ScramIllegalStateError("Received client-final-message before client-first-message")
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise self._fail("Invalid SCRAM client first message format")
        flag, authz, bare = parts
        if flag.startswith("p="):
            raise self._fail("Client requested channel binding, which is not supported")
        if flag not in ("n", "y"):
            raise self._fail("Invalid SCRAM client first message format: bad gs2 channel binding flag")
        authzid = ""
        if authz:
            decoded = unescape_saslname(authz[2:]) if authz.startswith("a=") else None
            if decoded is None:
                raise self._fail("Invalid SCRAM client first message format: bad authzid")
            authzid = decoded
        attrs = bare.split(",")
        if attrs[0].startswith("m="):
            raise self._fail("Client sent a mandatory SCRAM extension, which is not supported")
        if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r="):
            raise self._fail("Invalid SCRAM client first message format")
        username = unescape_saslname(attrs[0][2:])
        if username is None:
            raise self._fail("Invalid SCRAM client first message format: bad username")
        client_nonce = attrs[1][2:]
        if not _is_printable_nonce(client_nonce):
            raise self._fail("Invalid SCRAM client first message format: bad nonce")
        extensions: dict[str, str] = {}
        for attr in attrs[2:]:
            key, sep, value = attr.partition("=")
            if not sep or not key or key in extensions:
                raise self._fail("Invalid SCRAM client first message format: bad extension")
            extensions[key] = value
        if authzid and authzid != username:
            raise ScramAuthenticationError(AUTHZID_MISMATCH)

        self._token = extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"
        credential, owner = self._lookup(username)
        self._known = credential is not None
        if credential is None:
            credential = self._fake_credential(username)
        elif credential.iterations < self.mechanism.min_iterations:
            raise self._fail(f"Iterations {credential.iterations} is less than the minimum "
                             f"{self.mechanism.min_iterations} for {self.mechanism.name}")
        self._credential, self._sasl_name, self._owner, self.extensions = credential, username, owner, extensions
        self._gs2_header = f"{flag},{authz},".encode("utf-8")
        self._nonce = client_nonce + (self._server_nonce or _new_nonce())
        server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._auth_prefix = f"{bare},{server_first}"
        self._state = _FINAL
        return server_first.encode("utf-8")

    def _lookup(self, username: str) -> tuple[ScramCredential | None, str]:
        if not self._token:
            return self._credential_lookup(username), username
        found = self._token_lookup(username) if self._token_lookup is not None else None
        return (found[0], found[1]) if found is not None else (None, "")

    def _fake_credential(self, username: str) -> ScramCredential:
        salt = hmac.new(_FAKE_SALT_KEY, f"{self.mechanism.name}\0{username}".encode("utf-8"),
                        "sha256").digest()[:SALT_BYTES]
        size = self.mechanism.digest_size
        return ScramCredential(salt, secrets.token_bytes(size), secrets.token_bytes(size),
                               self.mechanism.min_iterations)

    def _client_final(self, message: bytes) -> bytes:
        text = self._decode(message)
        if text.startswith(("n,", "y,", "p=")):
            raise ScramIllegalStateError("Received client-first-message when client-final-message was expected")
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attrs = without_proof.split(",")
        if not sep or len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            raise self._fail("Invalid SCRAM client final message format")
        channel_binding = _b64decode(attrs[0][2:])
        if channel_binding is None or not hmac.compare_digest(channel_binding, self._gs2_header):
            raise self._fail("Channel binding data in the final client message does not match the gs2 header")
        if not hmac.compare_digest(attrs[1][2:].encode("utf-8"), self._nonce.encode("utf-8")):
            raise self._fail("Invalid client nonce in the final client message")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._auth_prefix},{without_proof}".encode("utf-8")
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        proof = _b64decode(proof_b64)
        if proof is None or len(proof) != len(client_signature):
            raise self._fail("Invalid client proof in the final client message")
        client_key = _xor(proof, client_signature)
        matches = hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key)
        if not (matches and self._known):
            raise self._fail("Invalid client credentials" if self._known else "Unknown user or token")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._state, self._credential, self.complete = _COMPLETE, None, True
        self.username = self._sasl_name
        self.principal_name = self._owner
        self.token_authenticated = self._token
        return f"v={_b64(server_signature)}".encode("ascii")


# --- client side ---

class ScramClient:
    """One client-side exchange, used for broker-to-broker links and tests. ``nonce`` is for test vectors only."""

    def __init__(self, mechanism: ScramMechanism | str, username: str, password: str,
                 extensions: dict[str, str] | None = None, nonce: str | None = None) -> None:
        self.mechanism = _mechanism(mechanism)
        if not username:
            raise ValueError("SCRAM username must not be empty")
        for key, value in (extensions or {}).items():
            if not key or any(c in key for c in ",=") or "," in value:
                raise ValueError(f"Invalid SCRAM extension {key!r}: keys may not contain ',' or '=', values ','")
        if nonce is not None and not _is_printable_nonce(nonce):
            raise ValueError("client nonce must be printable ASCII without ','")
        self._password = password
        self._nonce = nonce or _new_nonce()
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._gs2_header = "n,,"
        self._first_bare = f"n={escape_saslname(username)},r={self._nonce}{ext}"
        self._server_signature = b""
        self._state = "first"
        self.complete = False

    def first_message(self) -> bytes:
        """client-first-message: gs2 header, then n=<user>,r=<nonce> and any extensions."""
        self._expect("first", "final")
        return (self._gs2_header + self._first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        """client-final-message answering the server's salt, iterations and combined nonce."""
        self._expect("final", "verify")
        try:
            text = server_first.decode("utf-8")
            attrs = text.split(",")
            if attrs[0].startswith("m="):
                raise ScramAuthenticationError("Server sent a mandatory SCRAM extension, which is not supported")
            if len(attrs) < 3 or [a[:2] for a in attrs[:3]] != ["r=", "s=", "i="]:
                raise ScramAuthenticationError("Invalid SCRAM server first message format")
            nonce, salt, iterations = attrs[0][2:], _b64decode(attrs[1][2:]), attrs[2][2:]
            if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) or not _is_printable_nonce(nonce):
                raise ScramAuthenticationError("Invalid server nonce: does not start with the client nonce")
            if not salt or not (iterations.isascii() and iterations.isdigit()):
                raise ScramAuthenticationError("Invalid SCRAM server first message format")
            if int(iterations) < self.mechanism.min_iterations:
                raise ScramAuthenticationError(f"Requested iterations {iterations} is less than the minimum "
                                               f"{self.mechanism.min_iterations} for {self.mechanism.name}")
        except UnicodeDecodeError:
            self._state = "failed"
            raise ScramAuthenticationError("SCRAM server first message is not valid UTF-8") from None
        except ScramAuthenticationError:
            self._state = "failed"
            raise
        mech = self.mechanism
        salted = mech.salted_password(self._password, salt, int(iterations))
        client_key = mech.hmac(salted, b"Client Key")
        without_proof = f"c={_b64(self._gs2_header.encode('utf-8'))},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode("utf-8")
        proof = _xor(client_key, mech.hmac(mech.hash(client_key), auth_message))
        self._server_signature = mech.hmac(mech.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode("ascii")

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server's signature (proving it knows the credential); raises on e=<error> or a mismatch."""
        self._expect("verify", "done")
        text = server_final.decode("utf-8", errors="replace")
        if text.startswith("e="):
            self._state = "failed"
            raise ScramAuthenticationError(
                f"Sasl authentication using {self.mechanism.name} failed with error: {text[2:].split(',')[0]}")
        signature = _b64decode(text[2:].split(",")[0]) if text.startswith("v=") else None
        if signature is None or not hmac.compare_digest(signature, self._server_signature):
            self._state = "failed"
            raise ScramAuthenticationError("Invalid server signature in server final message")
        self.complete = True

    def _expect(self, state: str, next_state: str) -> None:
        if self._state != state:
            raise ScramIllegalStateError(f"SCRAM client is in state {self._state!r}, not {state!r}")
        self._state = next_state
