from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker import accel


def _run(env_extra: dict[str, str], code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(accel.__file__))))


def test_load_rejects_unknown():
    with pytest.raises(ValueError):
        accel.load("crc32c", "rust")
    with pytest.raises(ValueError):
        accel.load("nope", "pure")


def test_modules_have_the_chosen_implementation():
    prefix = "broker._native." if accel.IMPLEMENTATION == "native" else "broker._pure."
    assert accel.record_batch.__name__ == prefix + "record_batch"
    assert accel.IMPLEMENTATION in ("native", "pure")


def test_env_switches():
    code = "import logging; logging.basicConfig(level=logging.INFO); import broker.accel as a; print(a.IMPLEMENTATION)"
    forced = _run({"BROKER_NO_EXTENSIONS": "1"}, code)
    assert forced.stdout.strip() == "pure" and "BROKER_NO_EXTENSIONS" in forced.stderr
    default = _run({}, code)
    assert default.stdout.strip() == "native", default.stderr  # the extensions are built for the test run
    # a broken native import: fatal under REQUIRE_NATIVE, a WARNING and pure otherwise
    block = "import sys; sys.modules['broker._native.varint'] = None; "
    required = _run({"BROKER_REQUIRE_NATIVE": "1"}, block + code)
    assert required.returncode != 0 and "BROKER_REQUIRE_NATIVE" in required.stderr
    fallback = _run({}, block + code)
    assert fallback.stdout.strip() == "pure" and "WARNING" in fallback.stderr
