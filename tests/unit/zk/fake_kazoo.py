"""An in-memory ZooKeeper with kazoo's client interface, for deterministic unit tests of KafkaZkClient and the
controller (no server, no threads, no sleeps).

``FakeZooKeeper`` is the ensemble: one znode tree, sessions, one-shot watches. ``FakeKazooClient`` is one
session's client with the subset of ``kazoo.client.KazooClient`` that the broker uses: start/stop/close,
client_id, chroot, add_listener/remove_listener, create (ephemeral, sequence, makepath), get, set, delete
(version, recursive), exists, get_children (each with one-shot ``watch`` functions receiving a
``WatchedEvent``), ensure_path, the ``*_async`` variants, ``transaction()`` (create, set_data, delete, check;
``commit()`` returns per-op results, or on failure ``RolledBackError`` for the ops before the failing one, its
real error, then ``RuntimeInconsistency`` for the ops after it, exactly as ZooKeeper answers a failed multi).
``ChildrenWatch`` and ``DataWatch`` are kazoo's REAL recipes running on top of these primitives.

Stats follow ZooKeeper: every change gets a new zxid; czxid (creation zxid, Kafka's broker epoch), mzxid,
pzxid, version (data changes), cversion (child changes; also the next sequence number), ephemeralOwner.

Delivery: watch events and anything the recipes ``spawn`` are queued and run after the operation that caused
them, in order, on the calling thread (as kazoo runs them on its event thread, never inside the operation).
``expire_session(client)`` deletes the session's ephemerals, tells the client LOST, gives it a new session id
and tells it CONNECTED (the recipes then re-arm, as kazoo's do).
"""
from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any, Callable, Iterator

from kazoo.exceptions import (BadArgumentsError, BadVersionError, NoChildrenForEphemeralsError, NodeExistsError,
                              NoNodeError, NotEmptyError, RolledBackError, RuntimeInconsistency)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch


class _Node:
    __slots__ = ("data", "czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion", "owner", "children")

    def __init__(self, data: bytes, zxid: int, now: int, owner: int) -> None:
        self.data = data
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now
        self.version = 0
        self.cversion = 0
        self.owner = owner
        self.children: set[str] = set()

    def copy(self) -> "_Node":
        n = _Node.__new__(_Node)
        for s in _Node.__slots__:
            setattr(n, s, getattr(self, s))
        n.children = set(self.children)
        return n

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion, 0,
                         self.owner, len(self.data), len(self.children), self.pzxid)


def _parent(path: str) -> str:
    p = path.rsplit("/", 1)[0]
    return p or "/"


def _check_path(path: str) -> None:
    if not isinstance(path, str) or not path.startswith("/") or (path != "/" and path.endswith("/")) \
            or "//" in path:
        raise BadArgumentsError(f"invalid path {path!r}")


class FakeZooKeeper:
    """The in-memory ensemble shared by every FakeKazooClient of a test."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0)}
        self.zxid = 0
        self.now_ms = 1_700_000_000_000
        self._next_session = 0x1000
        # one-shot watches: path -> list of (client, fn)
        self._data_watches: dict[str, list[tuple["FakeKazooClient", Callable[[WatchedEvent], None]]]] = {}
        self._child_watches: dict[str, list[tuple["FakeKazooClient", Callable[[WatchedEvent], None]]]] = {}
        self._pending: list[Callable[[], None]] = []
        self._draining = False
        self.available = True
        self.clients: list[FakeKazooClient] = []

    # ------------------------------------------------------------------ helpers for tests
    def client(self, **kw: Any) -> "FakeKazooClient":
        c = FakeKazooClient(self, **kw)
        self.clients.append(c)
        return c

    def new_session_id(self) -> int:
        self._next_session += 1
        return self._next_session

    def dump(self, prefix: str = "/") -> dict[str, bytes]:
        """{path: data} under prefix (tests)."""
        with self._lock:
            return {p: n.data for p, n in sorted(self.nodes.items()) if p.startswith(prefix)}

    def data(self, path: str) -> bytes:
        return self.nodes[path].data

    def stat(self, path: str) -> ZnodeStat:
        return self.nodes[path].stat()

    def expire_session(self, client: "FakeKazooClient") -> None:
        """The session of `client` expires: its ephemerals vanish, it sees LOST, then a new session (CONNECTED)."""
        with self._lock:
            old = client.session_id
            events: list[tuple[str, str]] = []
            for path in sorted((p for p, n in self.nodes.items() if n.owner == old), key=len, reverse=True):
                self._do_delete(path, events)
            self._drop_watches_of(client)
            self._fire(events)
            client.session_id = self.new_session_id()
        client._notify_state(KazooState.LOST)
        client._notify_state(KazooState.CONNECTED)
        self.run_pending()

    def _drop_watches_of(self, client: "FakeKazooClient") -> None:
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                table[path] = [(c, f) for c, f in table[path] if c is not client]

    # ------------------------------------------------------------------ delivery
    def defer(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._pending.append(fn)

    def run_pending(self) -> None:
        """Run queued watch events / spawned work until none is left (re-entrant calls just return)."""
        with self._lock:
            if self._draining:
                return
            self._draining = True
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        return
                    fn = self._pending.pop(0)
                fn()
        finally:
            with self._lock:
                self._draining = False

    def _fire(self, events: list[tuple[str, str]]) -> None:
        """Queue the one-shot watches triggered by (kind, path) events; kinds: created, changed, deleted, child."""
        for kind, path in events:
            targets: list[tuple[FakeKazooClient, Callable[[WatchedEvent], None], str]] = []
            if kind in ("created", "changed", "deleted"):
                etype = {"created": EventType.CREATED, "changed": EventType.CHANGED,
                         "deleted": EventType.DELETED}[kind]
                targets += [(c, f, etype) for c, f in self._data_watches.pop(path, [])]
                if kind == "deleted":
                    targets += [(c, f, EventType.DELETED) for c, f in self._child_watches.pop(path, [])]
            else:
                targets += [(c, f, EventType.CHILD) for c, f in self._child_watches.pop(path, [])]
            seen: set[tuple[int, int]] = set()
            for c, f, etype in targets:
                key = (id(c), id(f))
                if key in seen:
                    continue
                seen.add(key)
                ev = WatchedEvent(etype, KeeperState.CONNECTED, c._unchroot(path))
                self._pending.append(partial(c._deliver, f, ev))

    # ------------------------------------------------------------------ the tree (absolute paths)
    def _zxid(self) -> int:
        self.zxid += 1
        self.now_ms += 1
        return self.zxid

    def _add_watch(self, table: dict, path: str, client: "FakeKazooClient", fn: Callable | None) -> None:
        if fn is not None:
            lst = table.setdefault(path, [])
            if not any(c is client and f == fn for c, f in lst):
                lst.append((client, fn))

    def get(self, client: "FakeKazooClient", path: str, watch: Callable | None) -> tuple[bytes, ZnodeStat]:
        _check_path(path)
        with self._lock:
            node = self.nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            self._add_watch(self._data_watches, path, client, watch)
            return node.data, node.stat()

    def exists(self, client: "FakeKazooClient", path: str, watch: Callable | None) -> ZnodeStat | None:
        _check_path(path)
        with self._lock:
            self._add_watch(self._data_watches, path, client, watch)
            node = self.nodes.get(path)
            return None if node is None else node.stat()

    def get_children(self, client: "FakeKazooClient", path: str, watch: Callable | None,
                     include_data: bool) -> Any:
        _check_path(path)
        with self._lock:
            node = self.nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            self._add_watch(self._child_watches, path, client, watch)
            children = sorted(node.children)
            return (children, node.stat()) if include_data else children

    # mutations: validate, apply, and append (kind, path) events; the caller fires them
    def _do_create(self, path: str, data: bytes, ephemeral: bool, sequence: bool, owner: int,
                   events: list[tuple[str, str]]) -> str:
        _check_path(path)
        if not isinstance(data, bytes):
            raise TypeError("value must be bytes")
        parent_path = _parent(path)
        parent = self.nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(parent_path)
        if parent.owner:
            raise NoChildrenForEphemeralsError(parent_path)
        if sequence:
            path = f"{path}{parent.cversion:010d}"
        if path in self.nodes:
            raise NodeExistsError(path)
        zxid = self._zxid()
        self.nodes[path] = _Node(data, zxid, self.now_ms, owner if ephemeral else 0)
        parent.children.add(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = zxid
        events += [("created", path), ("child", parent_path)]
        return path

    def _do_set(self, path: str, data: bytes, version: int, events: list[tuple[str, str]]) -> ZnodeStat:
        _check_path(path)
        if not isinstance(data, bytes):
            raise TypeError("value must be bytes")
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)
        node.data = data
        node.version += 1
        node.mzxid = self._zxid()
        node.mtime = self.now_ms
        events.append(("changed", path))
        return node.stat()

    def _do_delete(self, path: str, events: list[tuple[str, str]], version: int = -1) -> None:
        _check_path(path)
        if path == "/":
            raise BadArgumentsError("cannot delete /")
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)
        if node.children:
            raise NotEmptyError(path)
        zxid = self._zxid()
        del self.nodes[path]
        parent_path = _parent(path)
        parent = self.nodes[parent_path]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = zxid
        events += [("deleted", path), ("child", parent_path)]

    def _do_check(self, path: str, version: int) -> None:
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)

    def mutate(self, fn: Callable[[list[tuple[str, str]]], Any]) -> Any:
        """Run one mutation under the lock, fire its watches, deliver; returns fn's result (or raises)."""
        events: list[tuple[str, str]] = []
        with self._lock:
            try:
                return fn(events)
            finally:
                self._fire(events)

    def multi(self, client: "FakeKazooClient", ops: list[tuple]) -> list[Any]:
        """All-or-nothing multi-op; results as kazoo's TransactionRequest.commit() returns them."""
        with self._lock:
            # undo log: the nodes an op may change, as they were before this multi (None: absent)
            undo: dict[str, _Node | None] = {}

            def remember(path: str) -> None:
                if path not in undo:
                    node = self.nodes.get(path)
                    undo[path] = node.copy() if node is not None else None

            saved_zxid, saved_now = self.zxid, self.now_ms
            events: list[tuple[str, str]] = []
            results: list[Any] = []
            failed_at = -1
            error: Exception | None = None
            for i, op in enumerate(ops):
                kind = op[0]
                try:
                    if kind == "create":
                        _, path, data, ephemeral, sequence = op
                        remember(_parent(path))
                        if not sequence:
                            remember(path)
                        created = self._do_create(path, data, ephemeral, sequence, client.session_id, events)
                        undo.setdefault(created, None)
                        results.append(client._unchroot(created))
                    elif kind == "set":
                        _, path, data, version = op
                        remember(path)
                        results.append(self._do_set(path, data, version, events))
                    elif kind == "delete":
                        _, path, version = op
                        remember(path)
                        remember(_parent(path))
                        self._do_delete(path, events, version)
                        results.append(True)
                    elif kind == "check":
                        _, path, version = op
                        self._do_check(path, version)
                        results.append(True)
                    else:
                        raise BadArgumentsError(kind)
                except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError,
                        NoChildrenForEphemeralsError, BadArgumentsError) as e:
                    failed_at, error = i, e
                    break
            if failed_at < 0:
                self._fire(events)
                return results
            for path, node in undo.items():
                if node is None:
                    self.nodes.pop(path, None)
                else:
                    self.nodes[path] = node
            self.zxid, self.now_ms = saved_zxid, saved_now
            return ([RolledBackError() for _ in range(failed_at)] + [error]
                    + [RuntimeInconsistency() for _ in range(len(ops) - failed_at - 1)])


class _Async:
    """kazoo IAsyncResult look-alike holding an already computed value or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        try:
            self._value, self._exc = fn(), None
        except Exception as e:  # noqa: BLE001 - re-raised by get()
            self._value, self._exc = None, e

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if self._exc is not None:
            raise self._exc
        return self._value

    def get_nowait(self) -> Any:
        return self.get()

    def successful(self) -> bool:
        return self._exc is None


class _Handler:
    """The bits of kazoo's handler the watch recipes use; spawn() defers to the ensemble's queue."""

    sleep_func = staticmethod(time.sleep)

    def __init__(self, zk: FakeZooKeeper) -> None:
        self._zk = zk

    def lock_object(self) -> Any:
        return threading.Lock()

    def rlock_object(self) -> Any:
        return threading.RLock()

    def spawn(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._zk.defer(partial(fn, *args, **kwargs))


class FakeTransaction:
    def __init__(self, client: "FakeKazooClient") -> None:
        self._client = client
        self.operations: list[tuple] = []
        self.committed = False

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self.operations.append(("create", self._client._full(path), value, ephemeral, sequence))

    def delete(self, path: str, version: int = -1) -> None:
        self.operations.append(("delete", self._client._full(path), version))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self.operations.append(("set", self._client._full(path), value, version))

    def check(self, path: str, version: int) -> None:
        self.operations.append(("check", self._client._full(path), version))

    def commit(self) -> list[Any]:
        if self.committed:
            raise ValueError("Transaction already committed")
        self.committed = True
        self._client._require_connected()
        results = self._client._zk.multi(self._client, self.operations)
        self._client._zk.run_pending()
        return results

    def commit_async(self) -> _Async:
        return _Async(self.commit)

    def __enter__(self) -> "FakeTransaction":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not exc_type:
            self.commit()


class FakeKazooClient:
    """One ZooKeeper session with kazoo's client interface (see module docstring)."""

    def __init__(self, zk: FakeZooKeeper, hosts: str = "fake:2181", timeout: float = 10.0) -> None:
        self._zk = zk
        self.hosts = hosts
        self.timeout = timeout
        self.handler = _Handler(zk)
        self.session_id = 0
        self.chroot = ""
        self.connected = False
        self.state = KazooState.LOST
        self._listeners: list[Callable[[str], Any]] = []
        self.ChildrenWatch = partial(ChildrenWatch, self)
        self.DataWatch = partial(DataWatch, self)
        self.retry = lambda fn, *a, **kw: fn(*a, **kw)

    # ------------------------------------------------------------------ session
    def start(self, timeout: float = 15) -> None:
        if not self._zk.available:
            raise KazooTimeoutError("Connection time-out")
        self.session_id = self._zk.new_session_id()
        self.connected = True
        self._notify_state(KazooState.CONNECTED)
        self._zk.run_pending()

    def stop(self) -> None:
        if not self.connected:
            return
        events: list[tuple[str, str]] = []
        with self._zk._lock:
            for path in sorted((p for p, n in self._zk.nodes.items() if n.owner == self.session_id),
                               key=len, reverse=True):
                self._zk._do_delete(path, events)
            self._zk._drop_watches_of(self)
            self._zk._fire(events)
        self.connected = False
        self._notify_state(KazooState.LOST)
        self._zk.run_pending()

    def close(self) -> None:
        pass

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return (self.session_id, b"\x00" * 16) if self.connected else None

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify_state(self, state: str) -> None:
        self.state = state
        for listener in list(self._listeners):
            self._zk.defer(partial(listener, state))

    def _deliver(self, fn: Callable[[WatchedEvent], None], event: WatchedEvent) -> None:
        if self.connected:
            fn(event)

    def _require_connected(self) -> None:
        if not self.connected:
            from kazoo.exceptions import ConnectionClosedError
            raise ConnectionClosedError("Connection has been closed")

    # ------------------------------------------------------------------ chroot
    def _full(self, path: str) -> str:
        if not self.chroot:
            return path
        return self.chroot if path == "/" else self.chroot + path

    def _unchroot(self, path: str) -> str:
        if self.chroot and path.startswith(self.chroot):
            return path[len(self.chroot):] or "/"
        return path

    # ------------------------------------------------------------------ operations
    def _run(self, fn: Callable[[], Any]) -> Any:
        self._require_connected()
        try:
            return fn()
        finally:
            self._zk.run_pending()

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False, include_data: bool = False) -> Any:
        full = self._full(path)

        def op(events: list[tuple[str, str]]) -> Any:
            if makepath:
                self._ensure(_parent(full), events)
            created = self._zk._do_create(full, value, ephemeral, sequence, self.session_id, events)
            out = self._unchroot(created)
            return (out, self._zk.nodes[created].stat()) if include_data else out

        return self._run(lambda: self._zk.mutate(op))

    def _ensure(self, full: str, events: list[tuple[str, str]]) -> None:
        if full == "/" or full in self._zk.nodes:
            return
        self._ensure(_parent(full), events)
        self._zk._do_create(full, b"", False, False, self.session_id, events)

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        full = self._full(path)
        return self._run(lambda: self._zk.mutate(lambda ev: self._ensure(full, ev) or True))

    def get(self, path: str, watch: Callable | None = None) -> tuple[bytes, ZnodeStat]:
        return self._run(lambda: self._zk.get(self, self._full(path), watch))

    def exists(self, path: str, watch: Callable | None = None) -> ZnodeStat | None:
        return self._run(lambda: self._zk.exists(self, self._full(path), watch))

    def get_children(self, path: str, watch: Callable | None = None, include_data: bool = False) -> Any:
        return self._run(lambda: self._zk.get_children(self, self._full(path), watch, include_data))

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        full = self._full(path)
        return self._run(lambda: self._zk.mutate(lambda ev: self._zk._do_set(full, value, version, ev)))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        full = self._full(path)

        def op(events: list[tuple[str, str]]) -> bool:
            if recursive:
                if full not in self._zk.nodes:
                    raise NoNodeError(full)
                for p in list(self._subtree(full)):
                    self._zk._do_delete(p, events)
            else:
                self._zk._do_delete(full, events, version)
            return True

        return self._run(lambda: self._zk.mutate(op))

    def _subtree(self, full: str) -> Iterator[str]:
        node = self._zk.nodes.get(full)
        if node is None:
            return
        for child in sorted(node.children):
            yield from self._subtree(f"{full}/{child}" if full != "/" else f"/{child}")
        yield full

    def transaction(self) -> FakeTransaction:
        return FakeTransaction(self)

    # async variants (computed at once: the results are final when get() is called)
    def get_async(self, path: str, watch: Callable | None = None) -> _Async:
        return _Async(lambda: self.get(path, watch))

    def exists_async(self, path: str, watch: Callable | None = None) -> _Async:
        return _Async(lambda: self.exists(path, watch))

    def get_children_async(self, path: str, watch: Callable | None = None, include_data: bool = False) -> _Async:
        return _Async(lambda: self.get_children(path, watch, include_data))

    def create_async(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> _Async:
        return _Async(lambda: self.create(path, value, acl, ephemeral, sequence, makepath))

    def set_async(self, path: str, value: bytes, version: int = -1) -> _Async:
        return _Async(lambda: self.set(path, value, version))

    def delete_async(self, path: str, version: int = -1) -> _Async:
        return _Async(lambda: self.delete(path, version))
