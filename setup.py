"""Build the Cython hot paths: every pyx/<name>.pyx becomes broker._native.<name>.

    python setup.py build_ext --inplace      # from a clean clone (scripts/install.sh)
    BROKER_DEBUG=1 python setup.py build_ext --inplace   # annotate + linetrace + bounds checks
    pip install .                            # the package; metadata and entry points are in pyproject.toml
"""
from __future__ import annotations

import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("BROKER_DEBUG", "") not in ("", "0")


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
    return cythonize(exts, compiler_directives=directives, annotate=DEBUG, include_path=["pyx"])


setup(ext_modules=extensions(), zip_safe=False)
