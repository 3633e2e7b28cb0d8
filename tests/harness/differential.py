"""Send the same request to a real Kafka 3.9.1 broker and to ours, and compare the decoded answers field by field.

Both answers are decoded with the project's codec into plain dicts; fields whose values legitimately differ
between two independent brokers (the allow-list below, one category per reason) are removed everywhere in the
tree before the comparison. Everything else, error codes, error messages, offsets, config entries and their
sources, must be equal. A difference raises ``AssertionError`` with one line per differing path.
"""
from __future__ import annotations

import socket
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from broker.protocol.api import ApiKey
from tests.integration.broker.wire import ConnectionClosed, RawClient

#: Fields left out of the comparison, by category. Anything not named here is compared exactly.
ALLOW_LIST: Dict[str, Tuple[str, ...]] = {
    # each broker listens on its own port (both are broker id 0, so node ids are still compared)
    "addresses": ("port",),
    # random per cluster / per topic (Uuid.randomUuid), never the same on two clusters
    "ids": ("cluster_id", "topic_id"),
    # member ids embed a random UUID; JoinGroup's `leader` is the leader's member id
    "member ids": ("member_id", "leader"),
    # fetch sessions are numbered by each broker's own session cache
    "session ids": ("session_id",),
    # quota throttling depends on each broker's timing
    "throttle times": ("throttle_time_ms",),
}
_DROPPED = frozenset(name for names in ALLOW_LIST.values() for name in names)

class Closed(Exception):
    """The broker closed the connection instead of answering."""


class Wire(RawClient):
    """The tests' raw client (tests/integration/broker/wire.py) with this module's client id, a 30 s timeout, and
    a hang-up raised as ``Closed``."""

    def __init__(self, bootstrap: str, client_id: str = "differential") -> None:
        super().__init__(bootstrap, timeout_s=30)
        self.client_id = client_id

    def call(self, key: int, version: int, body: Any) -> Any:
        """Send one request; the decoded response (raises Closed if the broker hangs up)."""
        try:
            return self.request(key, version, body, client_id=self.client_id)
        except (ConnectionClosed, ConnectionError, socket.timeout) as e:
            raise Closed(str(e)) from None

    def exchange_raw(self, frame: bytes) -> bytes:
        """Send a whole frame as given; the response frame without its size prefix."""
        try:
            self.send_raw(frame)
            return self.recv_frame()[4:]
        except (ConnectionClosed, ConnectionError, socket.timeout) as e:
            raise Closed(str(e)) from None


def plain(value: Any, drop: frozenset = frozenset()) -> Any:
    """The decoded message as nested dicts/lists, allow-listed fields removed, UUIDs as strings."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        out = {k: plain(v, drop) for k, v in value.items() if k not in _DROPPED and k not in drop}
        for k, field in _UNORDERED.items():
            entries = out.get(k)
            if isinstance(entries, list) and entries and all(isinstance(e, dict) and field in e for e in entries):
                entries.sort(key=lambda e: repr(e[field]))
        return out
    if isinstance(value, list):
        return [plain(v, drop) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def differences(kafka: Any, ours: Any, path: str = "") -> List[str]:
    """One readable line per path where the two plain trees differ."""
    if isinstance(kafka, dict) and isinstance(ours, dict):
        out: List[str] = []
        for k in list(kafka) + [k for k in ours if k not in kafka]:
            p = f"{path}.{k}" if path else k
            if k not in ours or k not in kafka:
                out.append(f"{p}: kafka={kafka.get(k, '<absent>')!r} ours={ours.get(k, '<absent>')!r}")
            else:
                out.extend(differences(kafka[k], ours[k], p))
        return out
    if isinstance(kafka, list) and isinstance(ours, list):
        if _named(kafka) and _named(ours) and [e["name"] for e in kafka] != [e["name"] for e in ours]:
            k_names, o_names = [e["name"] for e in kafka], [e["name"] for e in ours]
            out = [f"{path}: names only in kafka {sorted(set(k_names) - set(o_names))}, "
                   f"only in ours {sorted(set(o_names) - set(k_names))}"]
            mine = {e["name"]: e for e in ours}
            for e in kafka:
                if e["name"] in mine:
                    out.extend(differences(e, mine[e["name"]], f"{path}[{e['name']}]"))
            return out
        if len(kafka) != len(ours):
            return [f"{path}: kafka has {len(kafka)} entries, ours {len(ours)}: kafka={kafka!r} ours={ours!r}"]
        out = []
        for i, (a, b) in enumerate(zip(kafka, ours)):
            out.extend(differences(a, b, f"{path}[{i}]"))
        return out
    return [] if kafka == ours else [f"{path}: kafka={kafka!r} ours={ours!r}"]


def _named(entries: List[Any]) -> bool:
    return bool(entries) and all(isinstance(e, dict) and "name" in e for e in entries)


#: lists Kafka fills from a HashMap (no defined order), compared sorted by the given field
_UNORDERED = {"configs": "name", "partitions": "partition_index", "entity": "entity_type", "values": "key"}


class Pair:
    """A connection to each broker; ``same`` sends a request to both and insists on equal answers."""

    def __init__(self, kafka_bootstrap: str, ours_bootstrap: str) -> None:
        self.kafka = Wire(kafka_bootstrap)
        try:
            self.ours = Wire(ours_bootstrap)
        except BaseException:
            self.kafka.close()
            raise

    def close(self) -> None:
        self.kafka.close()
        self.ours.close()

    def __enter__(self) -> "Pair":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def both(self, key: int, version: int, body: Any, drop: Iterable[str] = ()) -> Tuple[Any, Any]:
        """The plain answers (kafka, ours); a hang-up is the string ``"<closed>"``. ``body`` may be a function of
        the side ("kafka" or "ours") when the request carries an id each broker assigned (member, producer...)."""
        answers = []
        for side, wire in (("kafka", self.kafka), ("ours", self.ours)):
            try:
                answers.append(plain(wire.call(key, version, body(side) if callable(body) else body),
                                     frozenset(drop)))
            except Closed:
                answers.append("<closed>")
        return answers[0], answers[1]

    def same(self, key: int, version: int, body: Any, known: Optional[Mapping[str, str]] = None,
             sort: Optional[Iterable[Tuple[str, str]]] = None, drop: Iterable[str] = ()) -> Any:
        """Kafka's plain answer, after asserting ours is equal to it.

        ``known`` maps the differing paths that compat-tests/FINDINGS.md lists to their reason: those paths must
        differ (so a fixed one is noticed) and no other may. ``sort`` is (list path, key) pairs of lists whose
        order Kafka leaves unspecified (hash-map order), sorted by that key in both answers first. ``drop`` names
        further fields left out of this one comparison (each use says why, with its FINDINGS.md entry).
        """
        kafka, ours = self.both(key, version, body, drop)
        for list_path, sort_key in sort or ():
            for tree in (kafka, ours):
                _sort_at(tree, list_path.split(".") if list_path else [], sort_key)
        diff = differences(kafka, ours)
        name = f"{ApiKey(key).name} v{version}"
        expected = dict(known or {})
        unexpected = [d for d in diff if d.split(":", 1)[0] not in expected]
        missing = [p for p in expected if not any(d.split(":", 1)[0] == p for d in diff)]
        assert not unexpected and not missing, (
            f"{name}: answers differ\n  " + "\n  ".join(unexpected)
            + ("\n  listed in FINDINGS.md but now equal: " + ", ".join(missing) if missing else ""))
        return kafka


def _sort_at(tree: Any, parts: List[str], sort_key: str) -> None:
    if isinstance(tree, list):
        if not parts:
            tree.sort(key=lambda e: repr(e.get(sort_key) if isinstance(e, dict) else e))
            return
        for e in tree:
            _sort_at(e, parts, sort_key)
        return
    if isinstance(tree, dict) and parts and parts[0] in tree:
        _sort_at(tree[parts[0]], parts[1:], sort_key)
