"""pyproject.toml agrees with the rest of the project: the runtime dependencies with requirements.txt, every console
script with a callable main, every package-data pattern with files that exist (the integration test
tests/integration/test_packaging.py builds and installs the package for real)."""
from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> Dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower()


def runtime_requirements() -> List[str]:
    """The lines of requirements.txt's "Runtime" block (up to the next comment line)."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("# Runtime"))
    block: List[str] = []
    for ln in lines[start + 1:]:
        if ln.startswith("#"):
            break
        if ln.strip():
            block.append(ln.strip())
    return block


def test_runtime_dependencies_match_requirements_txt() -> None:
    assert sorted(pyproject()["project"]["dependencies"]) == sorted(runtime_requirements())


def test_build_requirements_are_declared() -> None:
    requires = {_name(r) for r in pyproject()["build-system"]["requires"]}
    assert {"setuptools", "cython", "wheel"} <= requires


def test_every_console_script_resolves_to_a_callable() -> None:
    scripts = pyproject()["project"]["scripts"]
    assert scripts["kafka-server-start"] == "broker.__main__:main"
    for name, target in scripts.items():
        module, _, attr = target.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        assert callable(fn), name


def test_package_data_patterns_match_files() -> None:
    data = pyproject()["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        directory = ROOT.joinpath(*package.split("."))
        for pattern in patterns:
            assert list(directory.glob(pattern)), f"{package}: {pattern} matches nothing"
    schemas = list((ROOT / "broker" / "protocol" / "schemas").glob("*.schema"))
    assert len(schemas) > 50  # the codec reads them at run time: they must ship


def test_the_checkouts_logging_config_is_the_packaged_one() -> None:
    assert (ROOT / "config" / "logging.ini").resolve() == (ROOT / "broker" / "config" / "logging.ini").resolve()


def test_version_is_single_sourced() -> None:
    import broker
    assert pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "broker.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", broker.__version__)
