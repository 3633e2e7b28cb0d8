"""Build the Cython hot paths: every pyx/<name>.pyx becomes broker._native.<name>.

    python setup.py build_ext --inplace      # from a clean clone (scripts/install.sh)
    BROKER_DEBUG=1 python setup.py build_ext --inplace   # annotate + linetrace + bounds checks
    pip install .                            # the package; metadata and entry points are in pyproject.toml

The package has one top-level import name, ``kafka_broker_py`` (docs/packaging.md): the checkout's ``broker/`` and
``tools/`` are installed as ``kafka_broker_py/broker`` and ``kafka_broker_py/tools`` (``PACKAGE_DIR``), where the
console scripts' launcher (``kafka_broker_py/_launch.py``) puts them on ``sys.path`` by their own names. The
extensions are compiled as ``broker._native.<name>``, the name they are imported by, and built into
``kafka_broker_py/broker/_native/`` (in place: ``broker/_native/``).

One extension has no checked-in source: ``broker._native.protocol_codecs``, the Cython twin of the generated
protocol codecs, is written into ``build/gen_pyx/`` from the schema files by broker.protocol.gen_pyx before
cythonize runs (so a clean clone needs no extra step, and it cannot drift from the schemas).
"""
from __future__ import annotations

import glob
import os
import sys

from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("BROKER_DEBUG", "") not in ("", "0")
#: the distribution's one top-level package
NAMESPACE = "kafka_broker_py"
#: the checkout's top-level packages it holds, each with its folder
PACKAGE_DIR = {f"{NAMESPACE}.broker": "broker", f"{NAMESPACE}.tools": "tools"}
#: where the generated protocol-codec .pyx is written (git-ignored, as all of build/)
GEN_PYX_DIR = os.path.join("build", "gen_pyx")
#: development tools that run from a checkout only: the benchmarks and the code and docs generators
NOT_INSTALLED = ["tools.bench", "tools.bench.*", "tools.codegen", "tools.codegen.*", "tools.docs", "tools.docs.*"]


def packages() -> list:
    found = find_packages(where=HERE, include=["broker", "broker.*", "tools", "tools.*"], exclude=NOT_INSTALLED)
    return [NAMESPACE] + [f"{NAMESPACE}.{name}" for name in sorted(found)]


#: the generated codecs are ~30 MB of straight-line C: -O1 without debug info halves the decode time of -O0 and
#: compiles in a fraction of -O3 -g's time (which takes over 5 minutes)
#: BROKER_CODEC_CFLAGS overrides them for a build whose speed does not matter (the packaging tests: "-O0 -g0"
#: compiles in a fifth of the time)
CODEC_CFLAGS = os.environ.get("BROKER_CODEC_CFLAGS", "-O1 -g0").split()


def generated_codecs() -> str:
    """Write build/gen_pyx/protocol_codecs.pyx from the schema files (unchanged files are not rewritten)."""
    sys.path.insert(0, HERE)
    try:
        from broker.protocol.gen_pyx import write_pyx
    finally:
        sys.path.remove(HERE)
    return os.path.relpath(write_pyx(os.path.join(HERE, GEN_PYX_DIR)), HERE)


def extensions() -> list:
    from Cython.Build import cythonize

    directives = {"language_level": "3", "embedsignature": True, "binding": True}
    macros = []
    if DEBUG:
        directives.update(boundscheck=True, wraparound=True, linetrace=True, initializedcheck=True)
        macros = [("CYTHON_TRACE", "1"), ("CYTHON_TRACE_NOGIL", "1")]
    else:
        directives.update(boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True)
    exts = []
    for path in sorted(glob.glob(os.path.join("pyx", "*.pyx"))):
        name = os.path.splitext(os.path.basename(path))[0]
        exts.append(Extension(
            "broker._native." + name, [path], include_dirs=["pyx"], define_macros=macros,
            extra_compile_args=["-O0", "-g"] if DEBUG else [],
        ))
    codecs = Extension(
        "broker._native.protocol_codecs", [generated_codecs()], define_macros=macros,
        extra_compile_args=["-O0", "-g"] if DEBUG else CODEC_CFLAGS,
    )
    built = cythonize(exts, compiler_directives=directives, annotate=DEBUG, include_path=["pyx"])
    # the generated module keeps Python's bounds and wraparound checks (a bad frame must raise, never read past
    # the buffer) and leaves the source out of the C comments (they double its size)
    built += cythonize([codecs], compiler_directives={
        "language_level": "3", "binding": True, "emit_code_comments": False}, annotate=DEBUG)
    for ext in built:  # compiled as broker._native.<name>; built where PACKAGE_DIR puts that package
        ext.name = f"{NAMESPACE}.{ext.name}"
    return built


setup(ext_modules=extensions(), packages=packages(), package_dir=PACKAGE_DIR, zip_safe=False)
