"""The install scripts print plain text: no colour escape codes in captured output, even when it is captured through a
terminal (CI logs, script(1)), where pip's rich output (the "[notice] A new release of pip" lines, its errors)
otherwise carries them. The scripts export TERM=dumb, NO_COLOR, PIP_NO_COLOR and PIP_DISABLE_PIP_VERSION_CHECK for
everything they run.

Cheap: scripts/install.sh on a copy of an installed checkout is a no-op of about a second, and pip fails at once on a
missing requirements file (offline).
"""
from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

#: run once, in the native pass of the unit lane (scripts/test.sh): runs the install scripts: the same with either
#: twin loaded
pytestmark = pytest.mark.twin_independent

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ["install.sh", "install-test.sh", "install-pipeline.sh"]
ESC = b"\x1b"


def run_in_terminal(cmd: List[str], env: Dict[str, str], timeout_s: float = 300.0,
                    cwd: Path = ROOT) -> Tuple[int, bytes]:
    """Run ``cmd`` with a pseudo-terminal as stdin, stdout and stderr (so tools colour if they ever do); (exit status,
    everything it printed)."""
    master, slave = os.openpty()
    p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=str(cwd),
                         start_new_session=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal's other end has exited
                    break
                if not data:
                    break
                out += data
            elif p.poll() is not None:
                break
        else:
            p.kill()
            pytest.fail(f"{cmd} did not finish in {timeout_s}s:\n{out.decode(errors='replace')}")
        return p.wait(30), out
    finally:
        os.close(master)


def exported_environment(script: str) -> Dict[str, str]:
    """The ``export NAME=value ...`` assignments of one install script."""
    text = (ROOT / "scripts" / script).read_text()
    found: Dict[str, str] = {}
    for line in re.findall(r"^export (.+)$", text, flags=re.M):
        for item in line.split():
            name, _, value = item.partition("=")
            found[name] = value
    return found


def colourful_environment() -> Dict[str, str]:
    """What invites colour: a terminal type that has it, FORCE_COLOR, pip's version check on."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "PIP_NO_COLOR", "PIP_DISABLE_PIP_VERSION_CHECK")}
    env.update(TERM="xterm-256color", FORCE_COLOR="1")
    return env


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_install_script_turns_colour_and_the_pip_notice_off(script: str) -> None:
    env = exported_environment(script)
    assert env.get("TERM") == "dumb" and env.get("NO_COLOR") and env.get("PIP_NO_COLOR") == "1", env
    assert env.get("PIP_DISABLE_PIP_VERSION_CHECK") == "1", env


def test_pip_prints_plain_text_under_the_install_scripts_environment(tmp_path: Path) -> None:
    """A pip error on a terminal: coloured by default (the control), plain text with what the scripts export."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "-r", str(tmp_path / "missing-requirements.txt")]
    rc, out = run_in_terminal(cmd, colourful_environment(), 120)
    assert rc != 0 and b"Could not open requirements file" in out and ESC in out, out  # the control
    rc, out = run_in_terminal(cmd, {**colourful_environment(), **exported_environment("install.sh")}, 120)
    assert rc != 0 and b"Could not open requirements file" in out, out
    assert ESC not in out, out


def installed_copy(dest: Path) -> Path:
    """A copy of this checkout with its build outputs (mtimes kept, so the extension build is up to date) and a link to
    its ``.venv``: install.sh runs there, so a test never rebuilds this checkout's extensions or, from a worktree
    whose ``.venv`` is a link, another checkout's."""
    skip = {".git", ".venv", ".cache", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__"}
    shutil.copytree(ROOT, dest, symlinks=True, ignore=lambda _d, names: [n for n in names if n in skip])
    (dest / ".venv").symlink_to((ROOT / ".venv").resolve())
    return dest


def test_install_sh_on_an_installed_checkout_prints_no_escape_codes(tmp_path: Path) -> None:
    copy = installed_copy(tmp_path / "checkout")
    rc, out = run_in_terminal(["bash", str(copy / "scripts" / "install.sh")], colourful_environment(), cwd=copy)
    assert rc == 0, out.decode(errors="replace")
    assert ESC not in out, out
