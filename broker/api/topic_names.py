"""Kafka's rules for legal topic names (Topic.validate)."""
from __future__ import annotations

import re
from typing import Optional

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def invalid_topic_reason(name: Optional[str]) -> Optional[str]:
    """None when ``name`` is a legal topic name, else why not (Kafka's wording)."""
    if name is None or name == "":
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, "
                f"'.', '_' and '-'")
    return None
