"""The nemesis's link faults on their own, without brokers (tests/harness/nemesis/netns.py): two namespaces of a
NetLab, a TCP echo server in one and a client in the other over one long-lived connection.

* ``delay(x, y, 100)``: every round trip takes at least 100 ms more (the x -> y half is held on arrival by the
  NFQUEUE delayer); ``heal()`` removes the rule, stops the delayer, and the round trip is back under the delay.
* ``lossy(x, y, 100)``: nothing gets through (a new connection times out, the open one gets no echo); ``heal()``
  and the open connection's retransmission gets through. ``lossy(x, y, 50)``: about half of 1,000 datagrams arrive.

A check that the faults are what they say, not a speed claim: the bounds are lower bounds of the fault (a loaded
machine only makes round trips longer) and a minimum over 10 round trips after the heal. Needs root (namespaces,
netfilter); without it the test fails with that message.
"""
from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from typing import IO, List, Optional

import pytest

from tests.harness.nemesis.netns import NetLab, sh

pytestmark = pytest.mark.slow

PORT = 7777
SERVER = r"""
import socket, sys, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", %(port)d)); l.listen()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # RCVBUFFORCE
u.bind(("0.0.0.0", %(port)d))
def tcp():
    def serve(c):
        while True:
            d = c.recv(4096)
            if not d:
                return
            c.sendall(d)
    while True:
        c, _ = l.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
def udp():
    n = 0
    while True:
        d = u.recv(100)
        if d == b"count?":
            print(n, flush=True); n = 0
        else:
            n += 1
threading.Thread(target=tcp, daemon=True).start()
print("listening", flush=True)
udp()
""" % {"port": PORT}
CLIENT = r"""
import socket, sys, time
host = sys.argv[1]
s = socket.create_connection((host, %(port)d), timeout=5)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("connected", flush=True)
for line in sys.stdin:
    cmd, arg = line.split()
    if cmd == "rtt":
        out = []
        for _ in range(int(arg)):
            t = time.monotonic(); s.sendall(b"x"); s.settimeout(10); s.recv(1)
            out.append((time.monotonic() - t) * 1000)
        print(" ".join("%%.2f" %% x for x in out), flush=True)
    elif cmd == "send":  # one byte, then wait up to arg seconds for its echo
        s.sendall(b"y"); s.settimeout(float(arg))
        try:
            s.recv(1); print("echo", flush=True)
        except socket.timeout:
            print("timeout", flush=True)
    elif cmd == "wait":  # the echo of an earlier send, up to arg seconds
        s.settimeout(float(arg))
        try:
            s.recv(1); print("echo", flush=True)
        except socket.timeout:
            print("timeout", flush=True)
    elif cmd == "connect":  # a new connection, arg seconds to connect
        try:
            socket.create_connection((host, %(port)d), timeout=float(arg)).close(); print("connected", flush=True)
        except OSError as e:
            print("failed", type(e).__name__, flush=True)
    elif cmd == "udp":  # arg datagrams to the server's UDP port
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(int(arg)):
            u.sendto(b"d", (host, %(port)d))
            if i %% 50 == 49:
                time.sleep(0.005)
        print("sent", flush=True)
""" % {"port": PORT}


def _line(f: IO[bytes], what: str, timeout_s: float = 30.0) -> str:
    """The next line a helper process prints, within a bound (a helper that died fails with its name)."""
    if not select.select([f], [], [], timeout_s)[0]:
        raise AssertionError(f"{what}: no answer within {timeout_s:.0f}s")
    line = f.readline().decode().strip()
    assert line, f"{what}: the helper process exited"
    return line


def _ask(p: subprocess.Popen, cmd: str, timeout_s: float = 30.0) -> str:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(cmd.encode() + b"\n")
    p.stdin.flush()
    return _line(p.stdout, cmd, timeout_s)


def _rtts(p: subprocess.Popen, n: int = 10) -> List[float]:
    return [float(x) for x in _ask(p, f"rtt {n}").split()]


def _udp_count(client: subprocess.Popen, server: subprocess.Popen, host: str, n: int) -> int:
    """Datagrams of ``n`` that reached the server: it counts until a ``count?`` datagram sent from the root
    namespace (a path no fault touches), after the last ones had time to cross."""
    assert _ask(client, f"udp {n}") == "sent"
    time.sleep(0.5)
    sk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sk.sendto(b"count?", (host, PORT))
    sk.close()
    assert server.stdout is not None
    return int(_line(server.stdout, "udp count"))


def test_delay_and_loss_on_one_link_then_heal() -> None:
    assert os.geteuid() == 0, "the NetLab link-fault test needs root (network namespaces, nftables, NFQUEUE)"
    lab = NetLab(["x", "y"])
    with lab:
        server = subprocess.Popen(lab.exec_prefix("y") + [sys.executable, "-c", SERVER], stdout=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL)
        client: Optional[subprocess.Popen] = None
        try:
            assert server.stdout is not None
            assert _line(server.stdout, "server") == "listening"
            client = subprocess.Popen(lab.exec_prefix("x") + [sys.executable, "-c", CLIENT, lab.addr["y"]],
                                      stdout=subprocess.PIPE, stdin=subprocess.PIPE)
            assert client.stdout is not None
            assert _line(client.stdout, "client") == "connected"
            base = _rtts(client)

            lab.delay("x", "y", 100)
            (_rule, delayer), = lab._delays.values()
            slow = _rtts(client)
            assert min(slow) >= 99.0, f"delay 100 ms: round trips {slow} (before: {base})"
            lab.heal()
            assert delayer.poll() is not None, "heal() left the delayer running"
            rules = sh(*lab.exec_prefix("y"), "iptables", "-t", "raw", "-S", "PREROUTING").stdout
            assert "NFQUEUE" not in rules, f"heal() left the NFQUEUE rule: {rules}"
            healed = _rtts(client)
            assert min(healed) < 50.0, f"after heal: round trips {healed} (before: {base})"

            lab.lossy("x", "y", 100)
            assert _ask(client, "send 2") == "timeout", "100 % loss: an echo came back"
            assert _ask(client, "connect 2").startswith("failed"), "100 % loss: a new connection was accepted"
            lab.heal()
            assert lab.table not in sh(*lab.exec_prefix("y"), "nft", "list", "tables").stdout, \
                "heal() left the nft table"
            # the byte sent under loss is retransmitted (RTO backoff, a few seconds) and echoed
            assert _ask(client, "wait 30", 35) == "echo", "the open connection did not recover after heal()"
            assert _ask(client, "connect 5") == "connected"

            lab.lossy("x", "y", 50)
            got = _udp_count(client, server, lab.addr["y"], 1000)
            lab.heal()
            after = _udp_count(client, server, lab.addr["y"], 1000)
            print(f"\nround trip min ms: before {min(base):.2f}, delay 100 ms {min(slow):.2f}, healed "
                  f"{min(healed):.2f}; datagrams of 1000 through 50 % loss {got}, after heal {after}")
            assert 300 <= got <= 700, f"50 % loss: {got} of 1000 datagrams arrived"
            assert after >= 900, f"after heal, datagrams are still lost ({after} of 1000 arrived)"
        finally:
            for p in (client, server):
                if p is not None:
                    p.kill()
                    p.wait()
