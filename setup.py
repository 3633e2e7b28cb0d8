"""Build the Cython hot paths: every pyx/<name>.pyx becomes broker._native.<name>.

    python setup.py build_ext --inplace      # from a clean clone (scripts/install.sh)
    BROKER_DEBUG=1 python setup.py build_ext --inplace   # annotate + linetrace + bounds checks
    pip install .                            # the package; metadata and entry points are in pyproject.toml

The package has one top-level import name, ``kafka_broker_py`` (docs/packaging.md): the checkout's ``broker/`` and
``tools/`` are installed as ``kafka_broker_py/broker`` and ``kafka_broker_py/tools`` (``PACKAGE_DIR``), where the
console scripts' launcher (``kafka_broker_py/_launch.py``) puts them on ``sys.path`` by their own names. The
extensions are compiled as ``broker._native.<name>``, the name they are imported by, and built into
``kafka_broker_py/broker/_native/`` (in place: ``broker/_native/``).
"""
from __future__ import annotations

import glob
import os

from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("BROKER_DEBUG", "") not in ("", "0")
#: the distribution's one top-level package
NAMESPACE = "kafka_broker_py"
#: the checkout's top-level packages it holds, each with its folder
PACKAGE_DIR = {f"{NAMESPACE}.broker": "broker", f"{NAMESPACE}.tools": "tools"}
#: development tools that run from a checkout only: the benchmarks and the code and docs generators
NOT_INSTALLED = ["tools.bench", "tools.bench.*", "tools.codegen", "tools.codegen.*", "tools.docs", "tools.docs.*"]


def packages() -> list:
    found = find_packages(where=HERE, include=["broker", "broker.*", "tools", "tools.*"], exclude=NOT_INSTALLED)
    return [NAMESPACE] + [f"{NAMESPACE}.{name}" for name in sorted(found)]


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
    built = cythonize(exts, compiler_directives=directives, annotate=DEBUG, include_path=["pyx"])
    for ext in built:  # compiled as broker._native.<name>; built where PACKAGE_DIR puts that package
        ext.name = f"{NAMESPACE}.{ext.name}"
    return built


setup(ext_modules=extensions(), packages=packages(), package_dir=PACKAGE_DIR, zip_safe=False)
