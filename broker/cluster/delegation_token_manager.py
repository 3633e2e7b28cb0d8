"""Delegation tokens in ZooKeeper, as Kafka 3.9's DelegationTokenManagerZk keeps them (KIP-48, KIP-373).

Layout (Kafka's ZkData): ``/delegation_token/tokens/<token id>`` holds the token information
(owner, requester, renewers, issue / max / expiry timestamps) as JSON; every change (create,
renew, expire, removal) also writes ``/delegation_token/token_changes/token_change_<seq>``
whose data is the token id. Every broker watches the notifications and reloads the named token
into its :class:`~broker.security.token_cache.DelegationTokenCache` (or drops it when its znode
is gone); notifications older than 15 minutes are purged, as Kafka's listener does.

The token's secret is never stored: it is ``HmacSHA512(delegation.token.secret.key, token id)``
(``delegation.token.master.key`` is the deprecated name), so every broker with the same key
recomputes it and derives the token's SCRAM credentials. Without a key, token authentication is
disabled and the APIs answer DELEGATION_TOKEN_AUTH_DISABLED.

Lifetimes: a token lives at most ``delegation.token.max.lifetime.ms`` (or the smaller lifetime
its creator asked for) and expires ``delegation.token.expiry.time.ms`` after creation or its
last renewal. The active controller removes expired tokens every
``delegation.token.expiry.check.interval.ms`` (and at once when it becomes controller), as
Kafka's controller does.

Creating, renewing, expiring and applying notifications hold one lock (Kafka's ``lock``);
ZooKeeper calls run on the ZooKeeper executor; watch callbacks only hop to the event loop.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

from broker.errors import ErrorCode
from broker.security.token_cache import DelegationTokenCache, TokenInformation, create_hmac
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.zk.paths import DelegationTokenChangeNotificationZNode, new_uuid_base64

if TYPE_CHECKING:
    from broker.util.executor import NamedExecutor
    from broker.zk.client import KafkaZkClient, ZkWatch

log = logging.getLogger(__name__)

#: Kafka's ZkNodeChangeNotificationListener default: notifications older than this are deleted.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ERROR_TIMESTAMP = -1


@dataclass(frozen=True)
class TokenConfig:
    secret_key: Optional[str] = None
    max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    expiry_time_ms: int = 24 * 3600 * 1000
    expiry_check_interval_ms: int = 3600 * 1000

    @property
    def enabled(self) -> bool:
        """Kafka's tokenAuthEnabled: a non-empty secret key."""
        return bool(self.secret_key)

    @classmethod
    def from_config(cls, get: Callable[[str], Any]) -> "TokenConfig":
        secret = get("delegation.token.secret.key")
        if secret is None:  # the deprecated name counts only when the new one is not set at all, as in Kafka
            secret = get("delegation.token.master.key")
        return cls(None if secret is None else str(secret), int(get("delegation.token.max.lifetime.ms")),
                   int(get("delegation.token.expiry.time.ms")),
                   int(get("delegation.token.expiry.check.interval.ms")))


@dataclass(frozen=True)
class CreateTokenResult:
    error_code: int
    owner: str
    token_requester: str
    issue_timestamp: int = ERROR_TIMESTAMP
    expiry_timestamp: int = ERROR_TIMESTAMP
    max_timestamp: int = ERROR_TIMESTAMP
    token_id: str = ""
    hmac: bytes = b""


class DelegationTokenManager:
    """One broker's view of the cluster's delegation tokens, and the operations of the token APIs."""

    def __init__(self, config: TokenConfig, zk: "KafkaZkClient", zk_calls: "NamedExecutor",
                 cache: DelegationTokenCache, controller: Any = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.zk = zk
        self.zk_calls = zk_calls
        self.cache = cache
        #: duck-typed KafkaController: ``is_active`` and ``add_controller_change_listener`` (None: never scans)
        self.controller = controller
        #: token timestamps (stored in ZooKeeper) on its wall_ms(); the expiry check interval on its timers
        self.clock = clock
        self._now = clock.wall_ms
        self._lock = asyncio.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._watch: Optional["ZkWatch"] = None
        self._last_seq = -1
        self._notified = False
        self._process_task: Optional["asyncio.Task[None]"] = None
        self._expiry_task: Optional["asyncio.Task[None]"] = None
        self._wake: Optional[asyncio.Event] = None
        self._stopping = False

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def hmac(self, token_id: str) -> bytes:
        assert self.config.secret_key
        return create_hmac(token_id, self.config.secret_key)

    # ------------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        """Create the token znodes, watch the notifications, load every token (only with a secret key)."""
        if not self.enabled:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        await self.zk_calls.run(self._start_zk)
        log.info("Delegation token cache loaded: %d tokens", len(self.cache.token_ids()))
        self._expiry_task = self._loop.create_task(self._expiry_loop())
        if self.controller is not None:
            self.controller.add_controller_change_listener(self._on_controller_change)

    def _start_zk(self) -> None:
        """zk-call thread: watch first, then note the last notification, then load (no change is missed)."""
        self.zk.create_delegation_token_paths()
        self._watch = self.zk.watch_children(DelegationTokenChangeNotificationZNode.path, self._on_notified)
        notifications = self.zk.get_token_change_notifications()
        self._last_seq = max((seq for seq, _, _ in notifications), default=-1)
        self._purge(notifications)
        for token_id in self.zk.get_delegation_token_ids():
            self._reload_token(token_id)

    async def shutdown(self) -> None:
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
        tasks = [t for t in (self._expiry_task, self._process_task) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ notifications
    def _on_notified(self) -> None:
        """kazoo thread: the notifications changed; let the event loop process them."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._stopping:
            return
        loop.call_soon_threadsafe(self._schedule_processing)

    def _schedule_processing(self) -> None:
        self._notified = True
        if self._process_task is None and not self._stopping:
            self._process_task = asyncio.get_running_loop().create_task(self._process())

    async def _process(self) -> None:
        try:
            while self._notified and not self._stopping:
                self._notified = False
                async with self._lock:
                    await self.zk_calls.run(self._process_notifications)
        except asyncio.CancelledError:
            raise
        except Exception:
            if not self._stopping:
                log.exception("Processing delegation token change notifications failed")
        finally:
            self._process_task = None

    def _process_notifications(self) -> None:
        """zk-call thread: reload the tokens named by new notifications, purge the old notifications."""
        notifications = self.zk.get_token_change_notifications()
        for seq, token_id, _ in notifications:
            if seq > self._last_seq:
                log.info("Processing token notification for tokenId: %s", token_id)
                self._reload_token(token_id)
                self._last_seq = seq
        self._purge(notifications)

    def _purge(self, notifications: Sequence[Tuple[int, str, int]]) -> None:
        now = self._now()
        for seq, _, ctime in notifications:
            if now - ctime > CHANGE_EXPIRATION_MS:
                log.debug("Purging token change notification %d", seq)
                self.zk.delete_token_change_notification(seq)

    def _reload_token(self, token_id: str) -> None:
        """zk-call thread: the token's znode into the cache (removed from the cache if the znode is gone)."""
        try:
            info = self.zk.get_delegation_token_info(token_id)
        except (ValueError, KeyError, TypeError):
            log.error("Error while getting token for tokenId: %s", token_id, exc_info=True)
            return
        if info is None:
            self.cache.remove(token_id)
        else:
            self.cache.update(info, self.hmac(token_id))

    # ------------------------------------------------------------------ writes (zk-call thread)
    def _store(self, info: TokenInformation, hmac: bytes) -> None:
        self.zk.set_or_create_delegation_token(info)
        self.cache.update(info, hmac)
        self.zk.create_token_change_notification(info.token_id)

    def _remove(self, token_id: str) -> None:
        self.zk.delete_delegation_token(token_id)
        self.cache.remove(token_id)
        self.zk.create_token_change_notification(token_id)

    # ------------------------------------------------------------------ the APIs' operations
    async def create_token(self, owner: str, requester: str, renewers: Sequence[str],
                           max_lifetime_ms: int) -> CreateTokenResult:
        if not self.enabled:
            return CreateTokenResult(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, owner, requester)
        async with self._lock:
            token_id = new_uuid_base64()
            issue = self._now()
            max_life = (self.config.max_lifetime_ms if max_lifetime_ms <= 0
                        else min(max_lifetime_ms, self.config.max_lifetime_ms))
            max_ts = issue + max_life
            expiry = min(max_ts, issue + self.config.expiry_time_ms)
            info = TokenInformation(token_id, owner, requester, tuple(renewers), issue, max_ts, expiry)
            hmac = self.hmac(token_id)
            await self.zk_calls.run(self._store, info, hmac)
        log.info("Created a delegation token: %s for owner: %s", token_id, owner)
        return CreateTokenResult(0, owner, requester, issue, expiry, max_ts, token_id, hmac)

    async def renew_token(self, principal: str, hmac: bytes, renew_period_ms: int) -> Tuple[int, int]:
        """(error code, new expiry timestamp or -1)."""
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        async with self._lock:
            info = self.cache.token_for_hmac(hmac)
            if info is None:
                return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP
            now = self._now()
            if not info.allowed_to_renew(principal):
                return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
            if info.expired(now):
                return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
            period = self.config.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
            expiry = min(info.max_timestamp, now + period)
            await self.zk_calls.run(self._store, info.with_expiry(expiry), hmac)
        log.info("Delegation token renewed for token: %s for owner: %s", info.token_id, info.owner)
        return 0, expiry

    async def expire_token(self, principal: str, hmac: bytes, expiry_period_ms: int) -> Tuple[int, int]:
        """(error code, new expiry timestamp or -1); a negative period removes the token at once."""
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        async with self._lock:
            info = self.cache.token_for_hmac(hmac)
            if info is None:
                return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP
            now = self._now()
            if not info.allowed_to_renew(principal):
                return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
            if expiry_period_ms < 0:
                await self.zk_calls.run(self._remove, info.token_id)
                log.info("Token expired for token: %s for owner: %s", info.token_id, info.owner)
                return 0, now
            if info.expired(now):
                return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
            expiry = min(info.max_timestamp, now + expiry_period_ms)
            await self.zk_calls.run(self._store, info.with_expiry(expiry), hmac)
        log.info("Updated expiry time for token: %s for owner: %s", info.token_id, info.owner)
        return 0, expiry

    def get_tokens(self, eligible: Callable[[TokenInformation], bool]) -> List[Tuple[TokenInformation, bytes]]:
        """The cached tokens `eligible` accepts, each with its HMAC (DescribeDelegationToken)."""
        if not self.enabled:
            return []
        return [(t, self.hmac(t.token_id)) for t in sorted(self.cache.tokens(), key=lambda t: t.issue_timestamp)
                if eligible(t)]

    async def expire_tokens(self) -> int:
        """Remove every token past its expiry or maximum timestamp (the controller's scan); returns how many."""
        if not self.enabled:
            return 0
        removed = 0
        async with self._lock:
            now = self._now()
            for info in self.cache.tokens():
                if info.expired(now):
                    log.info("Delegation token expired for token: %s for owner: %s", info.token_id, info.owner)
                    await self.zk_calls.run(self._remove, info.token_id)
                    removed += 1
        return removed

    # ------------------------------------------------------------------ the controller's expiry scan
    def _on_controller_change(self, _active_id: int) -> None:
        """Controller event thread: scan at once when this broker becomes the controller."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed() and not self._stopping:
            loop.call_soon_threadsafe(wake.set)

    def _is_controller(self) -> bool:
        return bool(self.controller is not None and self.controller.is_active)

    async def _expiry_loop(self) -> None:
        assert self._wake is not None
        interval_ms = self.config.expiry_check_interval_ms
        while not self._stopping:
            self._wake.clear()
            if self._is_controller():
                try:
                    await self.expire_tokens()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("Removing expired delegation tokens failed")
            try:
                await self.clock.wait_for_ms(self._wake.wait(), interval_ms)
            except asyncio.TimeoutError:
                pass


__all__ = ["DelegationTokenManager", "TokenConfig", "CreateTokenResult", "CHANGE_EXPIRATION_MS"]
