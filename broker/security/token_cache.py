"""Delegation tokens (KIP-48) as every broker caches them: token information, HMACs and the SCRAM credentials
derived from them (Kafka's DelegationTokenCache).

A token is identified by its id; its secret (the "password" its holder authenticates with) is
``HmacSHA512(delegation.token.secret.key, token id)``, so every broker sharing the secret key can
recompute it from the token id alone. The client authenticates with SASL/SCRAM using the token id as
user name, ``base64(hmac)`` as password and the ``tokenauth=true`` extension: each broker derives a
SCRAM-SHA-256 and a SCRAM-SHA-512 credential (4096 iterations, its own random salt) from that password.

Pure code (no ZooKeeper): ``broker.cluster.delegation_token_manager`` fills the cache from
``/delegation_token/tokens``; the SASL authenticator reads it through :meth:`DelegationTokenCache.scram_credential`.
"""
from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
import threading
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

from broker.security.scram import SCRAM_MECHANISM_NAMES, ScramCredential, scram_mechanism

HMAC_ALGORITHM = "HmacSHA512"


def parse_principal(text: str) -> Tuple[str, str]:
    """Kafka's SecurityUtils.parseKafkaPrincipal: "User:alice" -> ("User", "alice"); ValueError if malformed."""
    if not text:
        raise ValueError("principalName must not be null or empty")
    kind, sep, name = text.partition(":")
    if not sep:
        raise ValueError(f"Invalid principal name {text!r}: expected <type>:<name>")
    return kind, name


@dataclass(frozen=True)
class TokenInformation:
    """One token as stored in ZooKeeper (Kafka's TokenInformation); principals are "Type:name" strings."""

    token_id: str
    owner: str
    token_requester: str
    renewers: Tuple[str, ...] = ()
    issue_timestamp: int = -1
    max_timestamp: int = -1
    expiry_timestamp: int = -1

    def owner_or_renewer(self, principal: str) -> bool:
        """Whether `principal` owns, requested or may renew the token (it may then describe it)."""
        return principal == self.owner or principal == self.token_requester or principal in self.renewers

    def allowed_to_renew(self, principal: str) -> bool:
        """Renew and expire: only the owner or a renewer (not a requester acting for another owner)."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def with_expiry(self, expiry_timestamp: int) -> "TokenInformation":
        return replace(self, expiry_timestamp=expiry_timestamp)


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """HmacSHA512 keyed with the UTF-8 secret over the UTF-8 token id (DelegationTokenManager.createHmac)."""
    return _hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def hmac_b64(hmac: bytes) -> str:
    """Standard base64 (padded): the token's SCRAM password and the cache's lookup key."""
    return base64.b64encode(hmac).decode("ascii")


def token_scram_credentials(password: str) -> Dict[str, ScramCredential]:
    """A credential per Kafka SCRAM mechanism for a token password, at the mechanism's minimum iterations."""
    out = {}
    for name in SCRAM_MECHANISM_NAMES:
        mech = scram_mechanism(name)
        assert mech is not None
        out[name] = ScramCredential.from_password(mech, password, iterations=mech.min_iterations)
    return out


@dataclass
class _Entry:
    info: TokenInformation
    hmac_b64: str
    credentials: Dict[str, ScramCredential] = field(repr=False)


class DelegationTokenCache:
    """token id -> (information, HMAC, SCRAM credentials); thread-safe, updated from ZooKeeper notifications.

    ``credential_factory`` derives the SCRAM credentials from a password (tests may substitute a cheap one).
    """

    def __init__(self, credential_factory: Callable[[str], Dict[str, ScramCredential]] = token_scram_credentials
                 ) -> None:
        self._lock = threading.Lock()
        self._tokens: Dict[str, _Entry] = {}
        self._by_hmac: Dict[str, str] = {}
        self._credential_factory = credential_factory

    def update(self, info: TokenInformation, hmac: bytes) -> None:
        """Add or replace a token. Credentials are derived only for a new token or a changed HMAC."""
        password = hmac_b64(hmac)
        with self._lock:
            old = self._tokens.get(info.token_id)
            if old is not None and old.hmac_b64 == password:
                old.info = info
                return
        credentials = self._credential_factory(password)  # PBKDF2: outside the lock
        with self._lock:
            old = self._tokens.get(info.token_id)
            if old is not None:
                self._by_hmac.pop(old.hmac_b64, None)
            self._tokens[info.token_id] = _Entry(info, password, credentials)
            self._by_hmac[password] = info.token_id

    def remove(self, token_id: str) -> None:
        with self._lock:
            old = self._tokens.pop(token_id, None)
            if old is not None and self._by_hmac.get(old.hmac_b64) == token_id:
                del self._by_hmac[old.hmac_b64]

    def token(self, token_id: str) -> Optional[TokenInformation]:
        with self._lock:
            e = self._tokens.get(token_id)
            return e.info if e is not None else None

    def token_for_hmac(self, hmac: bytes) -> Optional[TokenInformation]:
        with self._lock:
            token_id = self._by_hmac.get(hmac_b64(hmac))
            e = self._tokens.get(token_id) if token_id is not None else None
            return e.info if e is not None else None

    def tokens(self) -> List[TokenInformation]:
        with self._lock:
            return [e.info for e in self._tokens.values()]

    def token_ids(self) -> List[str]:
        with self._lock:
            return list(self._tokens)

    def scram_credential(self, mechanism: str, token_id: str) -> Optional[Tuple[ScramCredential, str]]:
        """The SCRAM credential of a token for one mechanism and the token owner ("User:alice"), or None."""
        with self._lock:
            e = self._tokens.get(token_id)
            if e is None:
                return None
            cred = e.credentials.get(mechanism)
            return (cred, e.info.owner) if cred is not None else None

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()
            self._by_hmac.clear()


__all__ = ["DelegationTokenCache", "TokenInformation", "create_hmac", "hmac_b64", "parse_principal",
           "token_scram_credentials", "HMAC_ALGORITHM"]
