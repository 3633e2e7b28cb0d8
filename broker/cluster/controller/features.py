"""Feature versioning (KIP-584) rules for UpdateFeatures: pure functions.

Brokers advertise supported ranges in their registration (/brokers/ids/<id> "features":
{"name": {"min_version": a, "max_version": b}}); the controller keeps the finalized level of each feature in
/feature and only finalizes a level every live broker (and itself) supports.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from broker.errors import ErrorCode

# UpdateFeatures upgrade_type (v1+); v0's allow_downgrade=true means SAFE_DOWNGRADE
UNKNOWN = 0
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


def supported_ranges(registration_features: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """{name: (min, max)} from a broker registration's "features" object (unreadable entries are skipped)."""
    out: dict[str, tuple[int, int]] = {}
    for name, r in (registration_features or {}).items():
        try:
            out[str(name)] = (int(r["min_version"]), int(r["max_version"]))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def incompatible_features(supported: Mapping[str, tuple[int, int]], finalized: Mapping[str, int]) -> dict[str, int]:
    """The finalized features a broker with `supported` ranges cannot run with."""
    bad = {}
    for name, level in finalized.items():
        r = supported.get(name)
        if r is None or not r[0] <= level <= r[1]:
            bad[name] = level
    return bad


def is_delete_request(level: int, upgrade_type: int) -> bool:
    return level < 1 and upgrade_type != UPGRADE


def validate_feature_update(feature: str, level: int, upgrade_type: int, existing: int | None,
                            controller_supported: Mapping[str, tuple[int, int]],
                            brokers_supported: Iterable[Mapping[str, tuple[int, int]]]
                            ) -> tuple[int, str | None, int | None]:
    """(error code, message, new level or None to delete the feature), as Kafka's controller decides."""
    if not feature:
        return ErrorCode.INVALID_REQUEST, "Feature name can not be empty.", None
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return ErrorCode.INVALID_REQUEST, "Received unknown upgrade type.", None
    if is_delete_request(level, upgrade_type):
        if existing is None:
            return ErrorCode.INVALID_REQUEST, "Can not delete non-existing finalized feature.", None
        return ErrorCode.NONE, None, None
    if level < 1:
        return (ErrorCode.INVALID_REQUEST, f"Can not provide versionLevel: {level} less than 1 without setting "
                "the SAFE downgradeType in the request.", None)
    if existing is not None:
        if level == existing:
            verb = "downgrade" if upgrade_type == SAFE_DOWNGRADE else "upgrade"
            return (ErrorCode.INVALID_REQUEST, f"Can not {verb} a finalized feature from existing "
                    f"versionLevel:{existing} to the same value.", None)
        if level < existing and upgrade_type != SAFE_DOWNGRADE:
            return (ErrorCode.INVALID_REQUEST, f"Can not downgrade finalized feature from existing versionLevel:"
                    f"{existing} to provided versionLevel:{level} without setting the downgradeType to SAFE in "
                    "the request.", None)
        if upgrade_type != UPGRADE and level > existing:
            return (ErrorCode.INVALID_REQUEST, f"When the downgradeType is set to SAFE in the request, the "
                    f"provided versionLevel:{level} can not be greater than existing versionLevel:{existing}.", None)
    r = controller_supported.get(feature)
    if r is None:
        return (ErrorCode.INVALID_REQUEST, "Could not apply finalized feature update because the provided feature "
                "is not supported.", None)
    if not r[0] <= level <= r[1]:
        return (ErrorCode.INVALID_REQUEST, f"Could not apply finalized feature update because the provided "
                f"versionLevel:{level} is lower than the supported minVersion:{r[0]}.", None)
    if any(incompatible_features(b, {feature: level}) for b in brokers_supported):
        return (ErrorCode.INVALID_REQUEST, "Could not apply finalized feature update because brokers were found "
                "to have incompatible versions for the feature.", None)
    return ErrorCode.NONE, None, level
