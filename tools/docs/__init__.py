"""Generators of the checked-in reference documents under docs/ (each has a unit test that fails when stale)."""
