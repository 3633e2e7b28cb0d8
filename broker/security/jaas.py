"""Kafka JAAS configuration text: ``sasl.jaas.config`` values and JAAS files with named sections.

Only parsing: the broker reads login-module options from it (PLAIN ``user_<name>`` passwords, the ``username`` /
``password`` a broker presents to other brokers). Error messages name the problem and position but never echo
option values, which are usually passwords.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")

_WORD = re.compile(r"[A-Za-z0-9_.$\-]+")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class JaasConfigError(ValueError):
    """The JAAS text is malformed; the message is one line naming what and where."""


@dataclass(frozen=True)
class JaasLoginModule:
    """One ``<class> <flag> key=value ...;`` entry."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> JaasConfigError:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return JaasConfigError(f"{message} (line {line}, column {column})")

    def skip(self) -> None:
        """Skip whitespace and // or /* */ comments."""
        text = self.text
        while self.pos < len(text):
            if text[self.pos].isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("Unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos:self.pos + 1]

    def accept(self, char: str) -> bool:
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def word(self, what: str) -> str:
        self.skip()
        match = _WORD.match(self.text, self.pos)
        if not match:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of text"
            raise self.error(f"Expected {what} but found {found}")
        self.pos = match.end()
        return match.group()

    def value(self, key: str) -> str:
        self.skip()
        text, start = self.text, self.pos
        if start >= len(text) or text[start] == ";":
            raise self.error(f"Value not specified for key '{key}'")
        quote = text[start]
        if quote not in "\"'":
            end = start
            while end < len(text) and not text[end].isspace() and text[end] != ";":
                end += 1
            self.pos = end
            return text[start:end]
        out: list[str] = []
        i = start + 1
        while i < len(text):
            c = text[i]
            if c == quote:
                self.pos = i + 1
                return "".join(out)
            if c == "\\" and i + 1 < len(text):
                out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
                continue
            out.append(c)
            i += 1
        raise self.error(f"Unterminated quoted value for key '{key}'", start)

    def module(self) -> JaasLoginModule:
        class_name = self.word("login module class name")
        if self.at_end() or self.peek() == ";":
            raise self.error(f"Login module control flag not specified for {class_name}")
        flag_pos = self.pos
        flag = self.word("login module control flag")
        if flag.lower() not in FLAGS:
            raise self.error(f"Invalid login module control flag '{flag}' for {class_name}; expected one of "
                             + "|".join(FLAGS), flag_pos)
        options: dict[str, str] = {}
        while not self.accept(";"):
            if self.at_end() or self.peek() == "}":
                raise self.error(f"JAAS config entry for {class_name} not terminated by semi-colon")
            key = self.word("option name or ';'")
            if not self.accept("="):
                raise self.error(f"Value not specified for key '{key}'")
            options[key] = self.value(key)
        return JaasLoginModule(class_name, flag.lower(), options)

    def modules(self, closing: str = "") -> list[JaasLoginModule]:
        found = []
        while not self.at_end() and self.peek() != closing:
            found.append(self.module())
        return found


def parse_jaas_config(text: str) -> list[JaasLoginModule]:
    """Parse a ``sasl.jaas.config`` value: one or more ``<class> <flag> key=value ...;`` entries."""
    parser = _Parser(text)
    modules = parser.modules()
    if not modules:
        raise JaasConfigError("Login module not specified in JAAS config")
    return modules


def parse_jaas_file(text: str) -> dict[str, list[JaasLoginModule]]:
    """Parse a JAAS file of named sections (``KafkaServer { ... };``) into section name -> modules."""
    parser = _Parser(text)
    sections: dict[str, list[JaasLoginModule]] = {}
    while not parser.at_end():
        start = parser.pos
        name = parser.word("JAAS section name")
        if name in sections:
            raise parser.error(f"Duplicate JAAS section '{name}'", start)
        if not parser.accept("{"):
            raise parser.error(f"Expected '{{' after JAAS section name '{name}'")
        sections[name] = parser.modules("}")
        if not parser.accept("}"):
            raise parser.error(f"JAAS section '{name}' not closed by '}}'")
        if not parser.accept(";"):
            raise parser.error(f"JAAS section '{name}' not terminated by semi-colon after '}}'")
    return sections


def plain_users(modules: list[JaasLoginModule]) -> dict[str, str]:
    """User name -> password from PlainLoginModule ``user_<name>`` options (the first module naming a user wins)."""
    users: dict[str, str] = {}
    for module in modules:
        if module.class_name == PLAIN_LOGIN_MODULE:
            for key, value in module.options.items():
                if key.startswith("user_") and len(key) > len("user_"):
                    users.setdefault(key[len("user_"):], value)
    return users


def login_credentials(modules: list[JaasLoginModule]) -> tuple[str, str] | None:
    """(username, password) from the first module with both options: what a broker presents to other brokers."""
    for module in modules:
        if "username" in module.options and "password" in module.options:
            return module.options["username"], module.options["password"]
    return None
