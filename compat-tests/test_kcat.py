"""Debian's kcat (librdkafka 2.0.2, older than confluent-kafka's) against a real broker process.

This older librdkafka mis-skips tagged fields that hold their default value, so it also checks
that the broker writes only non-default tagged fields.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import uuid

import pytest

KCAT = shutil.which("kcat")


def kcat(*args: str, input: bytes | None = None, timeout: float = 60) -> str:
    if KCAT is None:
        pytest.fail("kcat is not installed (scripts/install.sh installs Debian's kcat package)")
    r = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()


def test_metadata_json(broker) -> None:
    md = json.loads(kcat("-b", broker.bootstrap, "-L", "-J"))
    assert [b["id"] for b in md["brokers"]] == [0]
    assert md["controllerid"] == 0


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume(broker, codec: str) -> None:
    topic = f"kcat-{codec}-{uuid.uuid4().hex[:6]}"
    lines = [f"key{i}:value-{i}" for i in range(500)]
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-K", ":", "-z", codec, "-H", "hk=hv",
         input="\n".join(lines).encode() + b"\n")
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k:%s:%h\n")
    got = sorted(out.splitlines())
    assert got == sorted(f"{line}:hk=hv" for line in lines)
    # Offsets are dense per partition.
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%p %o\n")
    by_p: dict = {}
    for row in out.splitlines():
        p, o = map(int, row.split())
        by_p.setdefault(p, []).append(o)
    assert all(offs == list(range(len(offs))) for offs in by_p.values())


def test_balanced_consumer_group_resumes_from_commits(broker) -> None:
    """kcat -G (librdkafka's high-level consumer): consume, commit on exit, a second run resumes."""
    topic = f"kcat-g-{uuid.uuid4().hex[:6]}"
    group = f"{topic}-grp"
    kcat("-b", broker.bootstrap, "-P", "-t", topic, input="\n".join(str(i) for i in range(300)).encode() + b"\n")
    first = kcat("-b", broker.bootstrap, "-G", group, topic, "-e", "-q", "-o", "beginning", "-f", "%s\n")
    assert sorted(int(v) for v in first.split()) == list(range(300))
    kcat("-b", broker.bootstrap, "-P", "-t", topic,
         input="\n".join(str(i) for i in range(300, 400)).encode() + b"\n")
    # A partition that got nothing in the first run has no commit: earliest, not the default latest.
    second = kcat("-b", broker.bootstrap, "-G", group, topic, "-e", "-q", "-X", "auto.offset.reset=earliest",
                  "-f", "%s\n")
    assert sorted(int(v) for v in second.split()) == list(range(300, 400))
