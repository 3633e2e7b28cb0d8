"""Connection-creation quotas by IP (KIP-612: /config/ips/<ip> and /config/ips/<default>
``connection_creation_rate``) and the ``max.connections.per.ip.overrides`` parser.

An IP that opens connections faster than its quota earns a delay; Kafka then closes that new
connection after the delay (so a reconnecting client is slowed, and the broker's accept loop is
not). The rate is kept as a token bucket of one window (``quota.window.size.seconds``) per IP,
so a short burst up to the quota is allowed, as with Kafka's one-second sampled rate.
"""
from __future__ import annotations

import ipaddress
import math
import socket
from typing import Dict, Optional

from broker.config.types import ConfigError
from broker.quota.entity import DEFAULT
from broker.util.clock import SYSTEM_CLOCK, Clock


def parse_ip_overrides(text: Optional[str]) -> Dict[str, int]:
    """`host1:100,10.0.0.1:5` -> {ip: limit} (host names resolved once, as Kafka does when it reads them)."""
    out: Dict[str, int] = {}
    for item in (p.strip() for p in (text or "").split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ConfigError("max.connections.per.ip.overrides", text, f"Invalid entry {item!r}: expected host:count")
        try:
            limit = int(count)
        except ValueError:
            raise ConfigError("max.connections.per.ip.overrides", text, f"Invalid count in {item!r}") from None
        try:
            ip = str(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            try:
                ip = socket.gethostbyname(host)
            except OSError:
                raise ConfigError("max.connections.per.ip.overrides", text,
                                  f"Unable to resolve host {host!r}") from None
        out[ip] = limit
    return out


def valid_ip_entity(name: str) -> bool:
    """Kafka accepts an IP literal or a resolvable host name as an ip quota entity."""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        try:
            socket.gethostbyname(name)
            return True
        except OSError:
            return False


class IpConnectionRateQuotas:
    """connection_creation_rate per IP (explicit IP first, then <default>)."""

    def __init__(self, window_seconds: int = 1, clock: Clock = SYSTEM_CLOCK) -> None:
        self.window_s = float(window_seconds)
        #: the buckets' time (mono_ms; ``delay_ms`` takes seconds)
        self.clock = clock
        self._rates: Dict[str, float] = {}
        self._buckets: Dict[str, list] = {}  # ip -> [tokens, last time]

    @property
    def enabled(self) -> bool:
        return bool(self._rates)

    def update(self, ip: str, rate: Optional[float]) -> None:
        """ip: an address or DEFAULT; None removes it."""
        key = ip if ip == DEFAULT else _normalise(ip)
        if rate is None:
            self._rates.pop(key, None)
        else:
            self._rates[key] = rate
        self._buckets.clear()

    def quota(self, ip: str) -> Optional[float]:
        return self._rates.get(ip, self._rates.get(DEFAULT))

    def delay_ms(self, ip: str, now: Optional[float] = None) -> int:
        """Record one new connection from `ip`; the delay (ms) it earned over the quota, 0 if within."""
        if not self._rates:
            return 0
        rate = self.quota(ip)
        if rate is None:
            return 0
        t = self.clock.mono_ms() / 1000.0 if now is None else now
        burst = max(1.0, rate * self.window_s)
        b = self._buckets.get(ip)
        if b is None:
            b = self._buckets[ip] = [burst, t]
        b[0] = min(burst, b[0] + (t - b[1]) * rate)
        b[1] = t
        b[0] -= 1.0
        if b[0] >= 0 or rate <= 0:
            return 0 if rate > 0 else int(self.window_s * 1000)
        return int(math.ceil(-b[0] / rate * 1000.0))


def _normalise(ip: str) -> str:
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        try:
            return socket.gethostbyname(ip)
        except OSError:
            return ip


__all__ = ["parse_ip_overrides", "valid_ip_entity", "IpConnectionRateQuotas"]
