"""SCRAM credentials of users, as every broker caches them from /config/users/<user> (Kafka's CredentialCache)."""
from __future__ import annotations

import threading
from typing import Dict, Mapping, Optional, Tuple

from broker.security.scram import SCRAM_MECHANISM_NAMES, ScramCredential, parse_credential


class ScramCredentialCache:
    """(mechanism, user) -> ScramCredential; updated from ZooKeeper, read by the SASL authenticator."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._creds: Dict[Tuple[str, str], ScramCredential] = {}

    def get(self, mechanism: str, username: str) -> Optional[ScramCredential]:
        with self._lock:
            return self._creds.get((mechanism, username))

    def update(self, username: str, config: Mapping[str, str]) -> None:
        """Replace a user's credentials with those in its config znode (other keys, e.g. quotas, ignored)."""
        with self._lock:
            for mech in SCRAM_MECHANISM_NAMES:
                text = config.get(mech)
                if text is None:
                    self._creds.pop((mech, username), None)
                else:
                    try:
                        self._creds[(mech, username)] = parse_credential(text)
                    except ValueError:
                        self._creds.pop((mech, username), None)

    def remove(self, username: str) -> None:
        self.update(username, {})


__all__ = ["ScramCredentialCache"]
