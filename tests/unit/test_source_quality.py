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
from typing import Dict, Iterator, Set, Tuple

import pytest

#: run once, in the native pass of the unit lane (scripts/test.sh): reads the source files (mypy, ruff, layering):
#: the same with either twin loaded
pytestmark = pytest.mark.twin_independent

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


def test_no_log_outside_storage() -> None:
    """Issue 20: above storage a partition's log is a ``PartitionLog`` (published state and owner commands), never the
    ``Log`` itself, so nothing up there can reach its lock, segments or producer state. ``remote_log/`` is the
    storage side too (Kafka's RemoteLogManager copies a log's segment files, indexes and epoch slices); its changes
    to a log are commands to the log's owner."""
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(BROKER).as_posix()
        if rel.startswith(("storage/", "remote_log/")):
            continue
        bad = {m for m in _imports(path) if m == "broker.storage.log"}
        assert not bad, f"broker/{rel} imports broker.storage.log; use broker.storage.partition_log.PartitionLog"


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


#: The layering contract, lowest first: a module may import broker modules of its own layer or a lower one, never
#: a higher one (TYPE_CHECKING imports included: a typed collaborator from above is a dependency too). It follows
#: design.md's `network -> api -> {replica, coordinator, quota, cluster} -> storage -> protocol.records -> accel`,
#: with every other package placed where its imports put it. broker.stats (plain counters the hot paths bump, read by
#: broker.metrics) sits at the bottom; broker.metrics (the collector and the endpoint, which read everything) near the top.
#: The record-batch summary, codecs and errors the native twins return and raise sit below accel; the rest of
#: broker.protocol.records (builders, walks) above it.
LAYERS: Tuple[Tuple[str, ...], ...] = (
    ("broker.errors", "broker.util", "broker.stats", "broker.log_setup", "broker.pid_files", "broker",
     "broker.protocol.records.batch_info", "broker.protocol.records.compression", "broker.protocol.records.errors"),
    ("broker.accel", "broker._pure", "broker._native"),
    ("broker.protocol",),
    ("broker.security",),
    ("broker.config",),
    ("broker.quota",),
    ("broker.zk",),
    ("broker.storage",),
    ("broker.remote_log",),
    ("broker.replica",),
    ("broker.coordinator",),
    ("broker.cluster",),
    ("broker.api",),
    ("broker.metrics",),
    ("broker.network",),
    ("broker.server_security", "broker.server"),
    ("broker.__main__",),
)


def _layer_of(module: str) -> int:
    """The layer of a dotted broker module: the longest prefix named in LAYERS wins."""
    best, best_len = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    assert best >= 0, f"{module} is in no layer of LAYERS"
    return best


def _broker_imports(path: Path) -> Iterator[str]:
    """Every broker module ``path`` imports, relative imports resolved, ``from pkg import mod`` as pkg.mod."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "broker":
                    yield a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(parts[:len(parts) - node.level + (1 if rel.name == "__init__" else 0)])
                module = base + ("." + node.module if node.module else "")
            else:
                module = node.module or ""
            if module.split(".")[0] != "broker":
                continue
            for a in node.names:  # `from broker.x import y`: y may be a module; count the deepest that is
                candidate = module + "." + a.name
                sub = ROOT.joinpath(*candidate.split("."))
                yield candidate if (sub.with_suffix(".py").exists() or sub.is_dir()) else module


def test_packages_import_only_lower_layers() -> None:
    """0 upward imports over every module of broker/ (this also rules out import circles between layers)."""
    upward = []
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        me = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        mine = _layer_of(me)
        for imported in _broker_imports(path):
            if _layer_of(imported) > mine:
                upward.append(f"{me} -> {imported}")
    assert not upward, "upward imports:\n" + "\n".join(sorted(set(upward)))


def _package(module: str) -> str:
    """``broker.<package>`` of a dotted module (a top-level module is its own package)."""
    return ".".join(module.split(".")[:2])


def test_no_import_circle_between_packages() -> None:
    """broker/'s packages (replica, storage, metrics, ...) import each other without a circle, TYPE_CHECKING imports
    included: the layering above is per module, so a package that straddled layers (the metrics counters at the bottom,
    the collector at the top, until the counters became broker.stats) would still close a loop between packages."""
    graph: Dict[str, Set[str]] = {}
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        me = _package(".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
        graph.setdefault(me, set()).update(p for p in map(_package, _broker_imports(path)) if p not in (me, "broker"))
    circles = []
    seen: Set[str] = set()
    for start in sorted(graph):  # a package that reaches itself is on a circle
        stack, reached = list(graph[start]), set()
        while stack:
            p = stack.pop()
            if p not in reached:
                reached.add(p)
                stack.extend(graph.get(p, ()))
        if start in reached and start not in seen:
            circle = sorted(p for p in reached if start in _reach(graph, p))
            seen.update(circle)
            circles.append(" <-> ".join(circle))
    assert not circles, "import circles between packages: " + "; ".join(circles)


def _reach(graph: Dict[str, Set[str]], start: str) -> Set[str]:
    stack, reached = list(graph.get(start, ())), set()
    while stack:
        p = stack.pop()
        if p not in reached:
            reached.add(p)
            stack.extend(graph.get(p, ()))
    return reached
