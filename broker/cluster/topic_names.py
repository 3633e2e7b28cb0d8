"""Kafka's rules for legal topic names (Topic.validate)."""
from __future__ import annotations

import re
from typing import Iterable, List, Optional

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def invalid_topic_reason(name: Optional[str]) -> Optional[str]:
    """None when ``name`` is a legal topic name, else why not (the wording of Kafka 3.9.1's CreateTopics answers)."""
    if name is None or name == "":
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is invalid: the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, "
                f"'.', '_' and '-'")
    return None


def colliding_topics(name: str, existing: Iterable[str]) -> List[str]:
    """Existing topics that differ from ``name`` only by '.' versus '_' (their metric names would clash): Kafka
    refuses to create such a topic (AdminZkClient.validateTopicCreate)."""
    if "." not in name and "_" not in name:
        return []
    key = name.replace(".", "_")
    return sorted(t for t in existing if t != name and t.replace(".", "_") == key)
