"""Chooses, once at import, whether codec_for uses the Cython-compiled decoders and encoders
(``broker._native.protocol_codecs``, built by setup.py from broker.protocol.gen_pyx) or only the generated Python.

Compiled is the default, as for broker.accel: ``BROKER_NO_EXTENSIONS=1`` (every extension off) or
``BROKER_NATIVE_CODECS=0`` (only these) keeps the generated Python; ``BROKER_REQUIRE_NATIVE=1`` makes a missing or
stale module fatal; otherwise that logs a WARNING and the generated Python is used.

Stale means built from other schema files or another generator: the module's DIGEST must equal
``gen_pyx.schema_digest()``, and each compiled decoder or encoder is used only when the digest of the Python source
it was built from equals that of the source generated now for the same (schema, version). The compiled functions
are closures over the generated namespace (struct classes, defaults), so both twins decode to the same classes.
"""
from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType
from typing import Any, Callable

from .gen_pyx import MODULE, schema_digest, source_digest
from .schema import MessageSchema

logger = logging.getLogger(__name__)

def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip().lower()


def _on(name: str, default: str = "") -> bool:
    return _env(name, default) in ("1", "true", "yes", "on")


def load_module() -> ModuleType:
    """Import the compiled module and check it was built from the current schemas; raises ImportError if not."""
    mod = importlib.import_module(f"broker._native.{MODULE}")
    if mod.DIGEST != schema_digest():
        raise ImportError(f"broker._native.{MODULE} was built from other schema files or another generator")
    return mod


def _choose() -> ModuleType | None:
    if _on("BROKER_NO_EXTENSIONS") or not _on("BROKER_NATIVE_CODECS", "1"):
        logger.info("Using generated-Python protocol codecs (BROKER_NO_EXTENSIONS or BROKER_NATIVE_CODECS=0)")
        return None
    try:
        mod = load_module()
    except ImportError as e:
        if _on("BROKER_REQUIRE_NATIVE"):
            raise ImportError("compiled protocol codecs required (BROKER_REQUIRE_NATIVE) but unusable: %s; "
                              "run `python setup.py build_ext --inplace`" % e) from e
        logger.warning("Compiled protocol codecs unavailable (%s); using the generated Python, which is slower. "
                       "Run `python setup.py build_ext --inplace`.", e)
        return None
    logger.info("Using compiled (Cython) protocol codecs")
    return mod


_module = _choose()
#: 'native' when codec_for uses the compiled codecs of the APIs they cover, else 'pure'
IMPLEMENTATION = "pure" if _module is None else "native"


def compiled_decoder(schema: MessageSchema, version: int, source: str, ns: dict[str, Any],
                     module: ModuleType | None = None) -> Callable[..., Any] | None:
    """The decoder compiled from ``source`` (the generated Python of (schema, version), run in ``ns``), or None
    when it is not compiled or was compiled from other source (then the caller runs ``source``). ``module``
    defaults to the one chosen at import (None: compiled codecs off)."""
    return _compiled(0, schema, version, source, ns, module)


def compiled_encoder(schema: MessageSchema, version: int, source: str, ns: dict[str, Any],
                     module: ModuleType | None = None) -> Callable[..., None] | None:
    """``compiled_decoder`` for the encoder: ``encode(w, ins, message)``, the generated Python's signature (``w``
    must be a bytearray, ``ins`` a list)."""
    return _compiled(1, schema, version, source, ns, module)


def _compiled(which: int, schema: MessageSchema, version: int, source: str, ns: dict[str, Any],
              module: ModuleType | None) -> Callable[..., Any] | None:
    mod = _module if module is None else module
    if mod is None:
        return None
    entry = mod.FACTORIES.get((schema.name, version))
    if entry is None:
        return None
    factory, digest = entry
    if digest != source_digest(source):
        if _on("BROKER_REQUIRE_NATIVE"):
            raise RuntimeError(f"compiled codec {schema.name} v{version} differs from the generated source; "
                               "run `python setup.py build_ext --inplace`")
        logger.warning("compiled codec %s v%d is stale; using the generated Python", schema.name, version)
        return None
    fn: Callable[..., Any] = factory(ns)[which]  # (decode, encode)
    return fn
