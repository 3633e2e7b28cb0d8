"""The one top-level import name of the installed distribution (``pip install kafka-broker-py``; docs/packaging.md).

A checkout has the broker's code in the top-level folders ``broker/`` and ``tools/``, whose modules import each
other by those names (``from broker.protocol import ...``). Installed, they sit under this package's directory,
``site-packages/kafka_broker_py/broker`` and ``.../tools``, so ``import broker`` in a user's program does not find
them. A program that wants them asks for them::

    import kafka_broker_py
    kafka_broker_py.activate()      # puts their directory on sys.path (and PYTHONPATH, for child processes)
    import broker

The console scripts (``kafka-server-start``, ``kafka-topics``, ...) do that through :mod:`kafka_broker_py._launch`.
In a checkout this package sits beside ``broker/`` and ``tools/`` and ``activate()`` puts the checkout on the path;
in an editable install (``pip install -e``) it finds them where the editable finder maps them.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["activate", "code_root"]


def code_root() -> Path:
    """The directory that holds the ``broker`` and ``tools`` packages of this distribution."""
    try:
        spec = importlib.util.find_spec(__name__ + ".broker")  # installed (and editable): our broker/ subpackage
    except ImportError:
        spec = None
    if spec is not None and spec.origin:
        return Path(spec.origin).resolve().parent.parent
    return Path(__file__).resolve().parent.parent  # a checkout: kafka_broker_py/ beside broker/ and tools/


def activate() -> Path:
    """Make ``broker`` and ``tools`` importable by those names in this process and in the Python processes it
    starts (a broker started with ``-daemon``, the brokers of ``kafka-cluster``: ``python -m broker``)."""
    root = str(code_root())
    if root not in sys.path:
        sys.path.insert(0, root)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + parts)
    return Path(root)
