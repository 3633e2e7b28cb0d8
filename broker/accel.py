"""Chooses, once at import, between the Cython modules (``broker._native``) and their pure twins
(``broker._pure``) for: crc32c, varint, record_batch, offset_index.

Native is the default. ``BROKER_NO_EXTENSIONS=1`` forces pure Python; ``BROKER_REQUIRE_NATIVE=1`` makes a failed
native import fatal; otherwise a failed import logs a WARNING (a silently slow broker is worse than a loud one)
and falls back. The choice is logged at INFO and kept in ``IMPLEMENTATION``.

Usage: ``from broker.accel import crc32c, varint, record_batch, offset_index`` (modules).
"""
from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

logger = logging.getLogger(__name__)

MODULES = ("crc32c", "varint", "record_batch", "offset_index")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def load(name: str, impl: str) -> ModuleType:
    """Import module ``name`` from implementation ``impl`` ('native' or 'pure'), without fallback."""
    if name not in MODULES:
        raise ValueError("unknown accelerated module %r" % name)
    if impl == "native":
        return importlib.import_module("broker._native." + name)
    if impl == "pure":
        return importlib.import_module("broker._pure." + name)
    raise ValueError("impl must be 'native' or 'pure', not %r" % impl)


def _choose() -> tuple[str, dict[str, ModuleType]]:
    if _env_flag("BROKER_NO_EXTENSIONS"):
        logger.info("Using pure-Python record code (BROKER_NO_EXTENSIONS set)")
        return "pure", {n: load(n, "pure") for n in MODULES}
    try:
        mods = {n: load(n, "native") for n in MODULES}
    except ImportError as e:
        if _env_flag("BROKER_REQUIRE_NATIVE"):
            raise ImportError("native extensions required (BROKER_REQUIRE_NATIVE) but not importable: %s; "
                              "run `python setup.py build_ext --inplace`" % e) from e
        logger.warning("Native extensions unavailable (%s); falling back to pure Python, which is much slower. "
                       "Run `python setup.py build_ext --inplace`.", e)
        return "pure", {n: load(n, "pure") for n in MODULES}
    logger.info("Using native (Cython) record code")
    return "native", mods


IMPLEMENTATION, _modules = _choose()
crc32c: ModuleType = _modules["crc32c"]
varint: ModuleType = _modules["varint"]
record_batch: ModuleType = _modules["record_batch"]
offset_index: ModuleType = _modules["offset_index"]

__all__ = ["IMPLEMENTATION", "MODULES", "load", "crc32c", "varint", "record_batch", "offset_index"]
