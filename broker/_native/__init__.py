"""Build output of ``pyx/`` (``python setup.py build_ext --inplace``); only this file and the ``.pyi`` stubs
are tracked. Import through ``broker.accel``."""
