"""Every test taking ``impl`` runs against both twins; the native one must be built (no silent skip)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.accel import MODULES, load


@pytest.fixture(params=["pure", "native"])
def impl(request: pytest.FixtureRequest) -> SimpleNamespace:
    """Namespace of the four modules of one implementation."""
    try:
        mods = {name: load(name, request.param) for name in MODULES}
    except ImportError as e:  # fail loudly: run `python setup.py build_ext --inplace`
        pytest.fail("native extensions not built: %s" % e)
    return SimpleNamespace(name=request.param, **mods)


@pytest.fixture(scope="session")
def both() -> tuple[SimpleNamespace, SimpleNamespace]:
    """(pure, native) for differential tests."""
    try:
        native = SimpleNamespace(**{name: load(name, "native") for name in MODULES})
    except ImportError as e:
        pytest.fail("native extensions not built: %s" % e)
    pure = SimpleNamespace(**{name: load(name, "pure") for name in MODULES})
    return pure, native
