"""Source-quality checks run as tests: pyflakes-level lint (ruff), the type gate (mypy over broker/ with
pyproject.toml's [tool.mypy]: 0 errors) and the layering rules of design.md.

Layering: the protocol layer never imports sockets/asyncio or anything above it; storage never
sees requests (no broker.api / broker.network / broker.protocol outside protocol.records); only
cluster/, coordinator/ and server.py talk to ZooKeeper; only server.py imports the network layer.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "broker"


def test_ruff_finds_no_errors() -> None:
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F,E9", "--output-format", "concise",
                        "broker", "tools", "kafka_broker_py", "tests", "compat-tests"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_finds_no_errors(tmp_path: Path) -> None:
    """Every module of broker/ type-checks (ErrorCode's members included); its cache stays out of the checkout."""
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "Success: no issues found" in r.stdout, r.stdout


def _imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _modules(package: str) -> Iterator[Tuple[Path, Set[str]]]:
    for path in sorted((BROKER / package).rglob("*.py")):
        yield path, set(_imports(path))


def test_protocol_layer_is_sans_io() -> None:
    for path, mods in _modules("protocol"):
        bad = {m for m in mods if m.split(".")[0] in ("asyncio", "socket", "selectors", "kazoo")
               or m.startswith(("broker.api", "broker.network", "broker.replica", "broker.storage", "broker.cluster",
                                "broker.zk", "broker.coordinator"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_storage_never_sees_requests() -> None:
    for path, mods in _modules("storage"):
        bad = {m for m in mods if m.startswith(("broker.api", "broker.network", "broker.zk", "broker.cluster",
                                                "broker.replica", "broker.coordinator", "asyncio"))
               or (m.startswith("broker.protocol") and not m.startswith("broker.protocol.records"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_only_cluster_coordinator_and_server_use_zookeeper() -> None:
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(BROKER).as_posix()
        if rel.startswith(("zk/", "cluster/", "coordinator/")) or rel == "server.py":
            continue
        mods = set(_imports(path))
        bad = {m for m in mods if m.startswith("broker.zk") or m.split(".")[0] == "kazoo"}
        assert not bad, f"broker/{rel} imports {bad}"


def test_only_server_imports_the_network_layer() -> None:
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(BROKER).as_posix()
        if rel.startswith("network/") or rel == "server.py":
            continue
        bad = {m for m in _imports(path) if m.startswith("broker.network")}
        assert not bad, f"broker/{rel} imports {bad}"
