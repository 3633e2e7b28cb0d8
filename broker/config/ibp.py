"""inter.broker.protocol.version (IBP): Kafka's versions, parsed and ordered.

The IBP decides which request versions brokers send each other and which mechanisms they use (as in
Kafka 3.9): AlterPartition from 2.7-IV2, AllocateProducerIds from 3.0-IV0, topic ids from 2.8-IV0,
leader recovery state (KIP-704) from 3.2-IV0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Every IBP Kafka 3.9 (ZooKeeper mode) accepts, oldest first: (release, IV) with IV -1 for the pre-IV releases.
_RELEASES: list[tuple[str, int]] = [
    ("0.8.0", -1), ("0.8.1", -1), ("0.8.2", -1), ("0.9.0", -1),
    ("0.10.0", 0), ("0.10.0", 1), ("0.10.1", 0), ("0.10.1", 1), ("0.10.1", 2), ("0.10.2", 0),
    ("0.11.0", 0), ("0.11.0", 1), ("0.11.0", 2), ("1.0", 0), ("1.1", 0), ("2.0", 0), ("2.0", 1),
    ("2.1", 0), ("2.1", 1), ("2.1", 2), ("2.2", 0), ("2.2", 1), ("2.3", 0), ("2.3", 1), ("2.4", 0), ("2.4", 1),
    ("2.5", 0), ("2.6", 0), ("2.7", 0), ("2.7", 1), ("2.7", 2), ("2.8", 0), ("2.8", 1), ("3.0", 0), ("3.0", 1),
    ("3.1", 0), ("3.2", 0), ("3.3", 0), ("3.3", 1), ("3.3", 2), ("3.3", 3), ("3.4", 0), ("3.5", 0), ("3.5", 1),
    ("3.5", 2), ("3.6", 0), ("3.6", 1), ("3.6", 2), ("3.7", 0), ("3.7", 1), ("3.7", 2), ("3.7", 3), ("3.7", 4),
    ("3.8", 0), ("3.9", 0),
]


@dataclass(frozen=True, order=True)
class InterBrokerProtocolVersion:
    """One IBP; ordered by age. `ordinal` indexes Kafka's list of versions."""

    ordinal: int
    release: str = field(compare=False)
    iv: int = field(compare=False)

    @staticmethod
    def parse(text: str) -> "InterBrokerProtocolVersion":
        """Kafka's forms: "3.9", "3.9-IV0", "3.9.1" (patch ignored), "2.6", "0.10.2", "0.10.2-IV0".

        A release without an IV means its latest IV (as Kafka's MetadataVersion.fromVersionString)."""
        s = str(text).strip()
        release, _, iv_text = s.partition("-")
        parts = release.split(".")
        keep = 3 if release.startswith("0.") else 2
        release = ".".join(parts[:keep])
        matches = [i for i, (r, _) in enumerate(_RELEASES) if r == release]
        if not matches:
            raise ValueError(f"Version {text} is not a valid version")
        if iv_text:
            if not iv_text.upper().startswith("IV") or not iv_text[2:].isdigit():
                raise ValueError(f"Version {text} is not a valid version")
            iv = int(iv_text[2:])
            for i in matches:
                if _RELEASES[i][1] == iv:
                    return InterBrokerProtocolVersion(i, release, iv)
            raise ValueError(f"Version {text} is not a valid version")
        i = matches[-1]
        return InterBrokerProtocolVersion(i, release, _RELEASES[i][1])

    def is_at_least(self, other: str) -> bool:
        return self.ordinal >= InterBrokerProtocolVersion.parse(other).ordinal

    def __str__(self) -> str:
        return self.release if self.iv < 0 else f"{self.release}-IV{self.iv}"
