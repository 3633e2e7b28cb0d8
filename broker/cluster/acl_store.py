"""ZkAclStore: the ACLs in ZooKeeper, kept in this broker's AclCache (Kafka 3.9's AclAuthorizer storage, ZK mode).

Layout and encodings are Kafka's (``broker.security.acl_zk_format``): one znode per resource pattern holding its
whole ACL set (``/kafka-acl/<Type>/<name>`` for LITERAL, ``/kafka-acl-extended/prefixed/<Type>/<name>`` for
PREFIXED), and a persistent sequential change notification per update (``/kafka-acl-changes/acl_changes_<n>``,
``/kafka-acl-extended-changes/acl_changes_<n>``) naming the pattern whose znode changed. Kafka brokers, Kafka's
``kafka-acls --authorizer-properties zookeeper.connect=...`` and this broker therefore share one set of ACLs.

- Start-up (Kafka's AclAuthorizer.configure): create the four roots, watch both notification paths first, then load
  every ACL, so no change can fall between the load and the watch.
- Notifications: each new child (sequence number above the last one processed) names a pattern; that pattern's znode
  is re-read and replaces the cached set (an absent znode empties it). Notifications older than 15 minutes are
  deleted while processing, as Kafka's ZkNodeChangeNotificationListener does (changeExpirationMs).
- Writes (CreateAcls/DeleteAcls on this broker, Kafka's updateResourceAcls): read the pattern's znode and its
  version, compute the new set, then compare-and-set it (create when absent, delete when the set becomes empty);
  on a version conflict re-read and retry, up to 10 retries with 100-150 ms back-off (waited on the store's Clock on
  the event loop, not by the ZooKeeper thread). A change is announced with
  a change notification, and this broker's cache is updated before the call returns, so the client's next request
  here already sees it (other brokers follow their watch).

Threads: ZooKeeper calls run on the broker's ZooKeeper executor; watch callbacks (kazoo's thread) only schedule work
on the event loop; the cache is only ever changed on the event loop. One asyncio lock serialises every
"read ZooKeeper, then update the cache" sequence, so a slower reader can never put an older ACL set back into the
cache after a newer one (reads on one ZooKeeper session are monotonic).
"""
from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from broker.errors import ErrorCode
from broker.security.acl import (AccessControlEntry, AclBinding, AclBindingFilter, PatternType, ResourcePattern,
                                 ResourcePatternFilter, ResourceType)
from broker.security.acl_zk_format import (CHANGE_SEQUENCE_PREFIX, EXTENDED_CHANGES_PATH, LITERAL_CHANGES_PATH,
                                           acl_path, change_notification, decode_acls, encode_acls,
                                           parse_change_notification, resource_type_dir, store_root, store_roots)
from broker.security.authorizer import AclCache
from broker.util.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from broker.util.executor import NamedExecutor
    from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

#: Kafka's ZkNodeChangeNotificationListener.changeExpirationMs
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
#: Kafka's AclAuthorizer.maxUpdateRetries, retryBackoffMs and retryBackoffJitterMs
MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_JITTER_MS = 50
#: How long one CreateAcls/DeleteAcls may wait for ZooKeeper before its ACLs fail (UNKNOWN_SERVER_ERROR)
WRITE_TIMEOUT_S = 30.0
#: Back-off before retrying notification processing that failed (ZooKeeper unreachable, ...)
RETRY_PROCESSING_S = 1.0

CHANGE_PATHS = (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH)
_Entries = FrozenSet[AccessControlEntry]
AclError = Tuple[int, Optional[str]]
#: (sequence number, child name, ctime ms, pattern or None if unusable, its ACLs)
_Change = Tuple[int, str, int, Optional[ResourcePattern], _Entries]


class AclUpdateError(Exception):
    """A pattern's ACLs could not be written (retries exhausted)."""


def _seq(name: str) -> Optional[int]:
    if not name.startswith(CHANGE_SEQUENCE_PREFIX):
        return None
    digits = name[len(CHANGE_SEQUENCE_PREFIX):]
    return int(digits) if digits.isdigit() else None


def _pattern_key(p: ResourcePattern) -> Tuple[int, int, str]:
    return (int(p.resource_type), int(p.pattern_type), p.name)


def filter_to_resources(pattern_filter: ResourcePatternFilter) -> Set[ResourcePattern]:
    """The stored patterns a definite filter may name, whether or not they are cached (Kafka's filterToResources)."""
    if not pattern_filter.matches_at_most_one() or pattern_filter.name is None:
        return set()
    rt, name, pt = pattern_filter.resource_type, pattern_filter.name, pattern_filter.pattern_type
    if pt in (PatternType.LITERAL, PatternType.PREFIXED):
        return {ResourcePattern(rt, name, pt)}
    if pt is PatternType.ANY:
        return {ResourcePattern(rt, name, PatternType.LITERAL), ResourcePattern(rt, name, PatternType.PREFIXED)}
    return set()


class ZkAclStore:
    """The ZooKeeper side of the ACL authorizer (see module docstring)."""

    def __init__(self, zk: "KafkaZkClient", zk_calls: "NamedExecutor", cache: AclCache, *,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS, write_timeout_s: float = WRITE_TIMEOUT_S,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.zk = zk
        self.zk_calls = zk_calls
        self.cache = cache
        self.change_expiration_ms = change_expiration_ms
        self.write_timeout_s = write_timeout_s
        #: wall_ms: the notification purge against ZooKeeper's ctimes; the write timeout and the backoff between
        #: compare-and-set retries are its timers on the event loop (no thread sleeps)
        self.clock = clock
        self._lock = asyncio.Lock()
        self._last_seq: Dict[str, int] = {p: -1 for p in CHANGE_PATHS}
        #: creation time (ms) of each notification seen, per notification path, for the 15-minute purge
        self._ctimes: Dict[str, Dict[str, int]] = {p: {} for p in CHANGE_PATHS}
        self._watches: List[Any] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._dirty = False
        self._reload = False
        self._task: Optional["asyncio.Task[None]"] = None
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.zk_calls.run(self.zk.ensure_paths, *store_roots())
        for parent in CHANGE_PATHS:  # watch first, then load: no change falls in between
            self._watches.append(await self.zk_calls.run(self.zk.watch_children, parent, self._on_change))
        self.zk.on_new_session(self._on_new_session)
        async with self._lock:
            await self._load_everything()
        log.info("Loaded %d ACLs on %d resource patterns from ZooKeeper", len(self.cache),
                 len(self.cache.patterns()))

    async def _load_everything(self) -> None:
        """Note the notifications present, then (re)load every ACL: the cache then equals ZooKeeper's ACLs, and
        later notifications are applied on top (caller holds the lock)."""
        for parent in CHANGE_PATHS:
            last, ctimes = await self.zk_calls.run(self._notification_stats, parent)
            self._last_seq[parent] = max(self._last_seq[parent], last)
            self._ctimes[parent] = ctimes
        loaded = dict(await self.zk_calls.run(self._load_all))
        for pattern in self.cache.patterns():
            if pattern not in loaded:
                self.cache.replace(pattern, ())
        for pattern, entries in loaded.items():
            self.cache.replace(pattern, entries)
        for parent in CHANGE_PATHS:
            await self._purge(parent)

    async def stop(self) -> None:
        self._stopping = True
        for w in self._watches:
            w.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # ------------------------------------------------------------------ ZooKeeper reads (zk-call thread)
    def _read_versioned(self, pattern: ResourcePattern) -> Tuple[_Entries, Optional[int]]:
        """The pattern's ACL set and znode version (None: no znode). Unreadable data counts as no ACLs, as in
        Kafka, and is logged."""
        got = self.zk.get_data_and_stat(acl_path(pattern))
        if got is None:
            return frozenset(), None
        data, stat = got
        try:
            return frozenset(decode_acls(data)), int(stat.version)
        except ValueError as exc:
            log.error("Ignoring unreadable ACLs of %s in ZooKeeper (%s): treated as no ACLs", pattern, exc)
            return frozenset(), int(stat.version)

    def _load_all(self) -> List[Tuple[ResourcePattern, _Entries]]:
        out: List[Tuple[ResourcePattern, _Entries]] = []
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for type_name in sorted(self.zk.get_children(store_root(pattern_type))):
                resource_type = ResourceType.from_name(type_name)
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    log.warning("Ignoring unknown ResourceType: %s", type_name)
                    continue
                for name in sorted(self.zk.get_children(resource_type_dir(pattern_type, resource_type))):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries, _ = self._read_versioned(pattern)
                    if entries:
                        out.append((pattern, entries))
        return out

    def _notification_stats(self, parent: str) -> Tuple[int, Dict[str, int]]:
        """(highest sequence number present, {child: ctime}) of one notification path."""
        last = -1
        ctimes: Dict[str, int] = {}
        for name in self.zk.get_children(parent):
            seq = _seq(name)
            if seq is None:
                continue
            got = self.zk.get_data_and_stat(f"{parent}/{name}")
            if got is not None:
                ctimes[name] = int(got[1].ctime)
            last = max(last, seq)
        return last, ctimes

    def _read_changes(self, parent: str, last: int) -> Tuple[List[_Change], Set[str]]:
        """The notifications after sequence `last`, each with the current ACLs of the pattern it names; and the
        names of every notification still present."""
        children = self.zk.get_children(parent)
        new = sorted((seq, name) for name in children if (seq := _seq(name)) is not None and seq > last)
        out: List[_Change] = []
        for seq, name in new:
            got = self.zk.get_data_and_stat(f"{parent}/{name}")
            if got is None:  # purged meanwhile by another broker; its change was long applied
                continue
            data, stat = got
            try:
                pattern = parse_change_notification(parent, data)
            except ValueError as exc:
                log.warning("Ignoring ACL change notification %s/%s: %s", parent, name, exc)
                out.append((seq, name, int(stat.ctime), None, frozenset()))
                continue
            entries, _ = self._read_versioned(pattern)
            out.append((seq, name, int(stat.ctime), pattern, entries))
        return out, set(children)

    def _delete_notifications(self, parent: str, names: List[str]) -> None:
        for name in names:
            self.zk.delete_if_version(f"{parent}/{name}", -1)

    # ------------------------------------------------------------------ ZooKeeper writes (zk-call thread)
    def _try_update(self, pattern: ResourcePattern, transform: Callable[[_Entries], Iterable[AccessControlEntry]],
                    last: bool) -> Optional[Tuple[_Entries, _Entries]]:
        """One attempt of Kafka's updateResourceAcls: compare-and-set the pattern's znode to transform(current ACLs)
        and announce a real change. Returns (ACLs before, ACLs after), or None after a concurrent change (read again
        and retry after a backoff; the ``last`` attempt raises instead)."""
        path = acl_path(pattern)
        current, version = self._read_versioned(pattern)
        new = frozenset(transform(current))
        if new:
            ok = (self.zk.set_data_if_version(path, encode_acls(new), version) if version is not None
                  else self.zk.create_if_absent(path, encode_acls(new)))
        else:
            ok = self.zk.delete_if_version(path, version) if version is not None else True
        if not ok:
            if last:
                raise AclUpdateError(f"Failed to update ACLs for {pattern} after trying a maximum of "
                                     f"{MAX_UPDATE_RETRIES} times")
            log.debug("Failed to update ACLs for %s at version %s; reading them again and retrying", pattern, version)
            return None
        if new != current:
            parent, data = change_notification(pattern)
            self.zk.create_sequential(f"{parent}/{CHANGE_SEQUENCE_PREFIX}", data)
            log.info("Updated ACLs for %s (%d ACLs)", pattern, len(new))
        return current, new

    async def _update(self, pattern: ResourcePattern, transform: Callable[[_Entries], Iterable[AccessControlEntry]]
                      ) -> Tuple[_Entries, _Entries]:
        """Kafka's updateResourceAcls: attempts on the zk-call thread, retried on concurrent changes after a backoff
        on the clock (Kafka's retryBackoffMs plus jitter)."""
        attempt = 0
        while True:
            done = await self.zk_calls.run(self._try_update, pattern, transform, attempt == MAX_UPDATE_RETRIES)
            if done is not None:
                return done
            attempt += 1
            await self.clock.sleep_ms(RETRY_BACKOFF_MS + random.randrange(RETRY_BACKOFF_JITTER_MS))

    # ------------------------------------------------------------------ writes (event loop)
    async def create_acls(self, bindings: List[AclBinding]) -> List[Optional[AclError]]:
        """Add the bindings (already validated), grouped per pattern; per binding None or its error."""
        results: List[Optional[AclError]] = [None] * len(bindings)
        by_pattern: Dict[ResourcePattern, List[int]] = {}
        for i, b in enumerate(bindings):
            by_pattern.setdefault(b.pattern, []).append(i)
        async with self._lock:
            for pattern, idxs in by_pattern.items():
                added = frozenset(bindings[i].entry for i in idxs)
                try:
                    _, after = await self._write(pattern, lambda cur, added=added: cur | added)  # type: ignore
                except Exception as exc:
                    log.error("Failed to create ACLs for %s: %s", pattern, exc)
                    for i in idxs:
                        results[i] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), None)
        return results

    async def delete_acls(self, filters: List[AclBindingFilter]
                          ) -> List[List[Tuple[AclBinding, Optional[AclError]]]]:
        """Kafka's deleteAcls: every cached pattern, plus the patterns definite filters name (maybe not yet
        cached), loses the entries its matching filters match; each deleted binding is reported under the first
        filter that matches it."""
        results: List[List[Tuple[AclBinding, Optional[AclError]]]] = [[] for _ in filters]
        async with self._lock:
            candidates: Set[ResourcePattern] = set(self.cache.patterns())
            for f in filters:
                candidates |= filter_to_resources(f.pattern_filter)
            for pattern in sorted(candidates, key=_pattern_key):
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(pattern)]
                if not matching:
                    continue

                def keep(cur: _Entries, matching: Any = matching) -> Iterable[AccessControlEntry]:
                    return (e for e in cur if not any(f.entry_filter.matches(e) for _, f in matching))

                error: Optional[AclError] = None
                try:
                    before, after = await self._write(pattern, keep)
                except Exception as exc:
                    log.error("Failed to delete ACLs of %s: %s", pattern, exc)
                    before = self.cache.acls(pattern)
                    after = frozenset(keep(before))
                    error = (int(ErrorCode.UNKNOWN_SERVER_ERROR), None)
                for entry in sorted(before - after, key=lambda e: (e.principal, e.host, e.operation,
                                                                   e.permission_type)):
                    idx = next(i for i, f in matching if f.entry_filter.matches(entry))
                    results[idx].append((AclBinding(pattern, entry), error))
        return results

    async def _write(self, pattern: ResourcePattern, transform: Callable[[_Entries], Iterable[AccessControlEntry]]
                     ) -> Tuple[_Entries, _Entries]:
        """Run one update in ZooKeeper (bounded) and apply its outcome to the cache (caller holds the lock)."""
        before, after = await self.clock.wait_for_ms(self._update(pattern, transform), self.write_timeout_s * 1000.0)
        self.cache.replace(pattern, after)
        return before, after

    # ------------------------------------------------------------------ change notifications
    def _on_new_session(self) -> None:
        """A new ZooKeeper session after an expiry: changes may have been missed (notifications purged meanwhile),
        so everything is reloaded, not only the notifications after the last one seen."""
        self._reload = True
        self._on_change()

    def _on_change(self) -> None:
        """kazoo's (or the session helper's) thread: hand over to the event loop."""
        loop = self._loop
        if loop is None or self._stopping or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._kick)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _kick(self) -> None:
        self._dirty = True
        if self._task is None and not self._stopping:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._dirty and not self._stopping:
                self._dirty = False
                if self._reload:
                    self._reload = False
                    try:
                        async with self._lock:
                            await self._load_everything()
                    except BaseException:
                        self._reload = True  # retried with the next attempt
                        raise
                    log.info("Reloaded %d ACLs from ZooKeeper after a new session", len(self.cache))
                await self.process_notifications()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not self._stopping:
                log.warning("Processing ACL change notifications failed (%s: %s); retrying in %.0f s",
                            type(exc).__name__, exc, RETRY_PROCESSING_S)
                self.clock.call_later_ms(RETRY_PROCESSING_S * 1000.0, self._kick)
        finally:
            self._task = None

    async def process_notifications(self) -> None:
        """Apply every notification not processed yet, then purge the expired ones."""
        async with self._lock:
            for parent in CHANGE_PATHS:
                changes, present = await self.zk_calls.run(self._read_changes, parent, self._last_seq[parent])
                ctimes = self._ctimes[parent]
                for gone in set(ctimes) - present:
                    del ctimes[gone]
                for seq, name, ctime, pattern, entries in changes:
                    ctimes[name] = ctime
                    self._last_seq[parent] = max(self._last_seq[parent], seq)
                    if pattern is not None:
                        log.info("Processing Acl change notification for %s, %d ACLs", pattern, len(entries))
                        self.cache.replace(pattern, entries)
                await self._purge(parent)

    async def _purge(self, parent: str) -> None:
        """Delete the notifications of `parent` created more than change_expiration_ms ago (caller holds the lock)."""
        cutoff = self.clock.wall_ms() - self.change_expiration_ms
        ctimes = self._ctimes[parent]
        old = sorted(name for name, ctime in ctimes.items() if ctime < cutoff)
        if not old:
            return
        await self.zk_calls.run(self._delete_notifications, parent, old)
        for name in old:
            ctimes.pop(name, None)
        log.debug("Purged %d ACL change notifications under %s", len(old), parent)


__all__ = ["ZkAclStore", "AclUpdateError", "filter_to_resources", "CHANGE_EXPIRATION_MS"]
