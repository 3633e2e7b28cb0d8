"""Pure-Python reference twins of the Cython modules in ``pyx/``: they are the specification.

Never import these directly outside tests; use ``broker.accel``.
"""
