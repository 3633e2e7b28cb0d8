"""Fetch session cache (KIP-227) rules."""
from broker.api.fetch_session import CachedPartition, FetchSessionCache
from broker.errors import ErrorCode


def cp(offset: int) -> CachedPartition:
    return CachedPartition(offset, 1024)


def test_sessionless_full_fetch_keeps_no_state() -> None:
    cache = FetchSessionCache()
    err, session, parts = cache.begin(0, -1, False, [(("t", 0), cp(5))], [], 0)
    assert err == 0 and session is None and [tp for tp, _ in parts] == [("t", 0)]
    assert len(cache) == 0


def test_initial_then_incremental_updates_and_forgets() -> None:
    cache = FetchSessionCache()
    err, s, parts = cache.begin(0, 0, False, [(("t", 0), cp(0)), (("t", 1), cp(0))], [], 0)
    assert err == 0 and s is not None and s.session_id > 0 and s.epoch == 1
    assert len(parts) == 2
    # Incremental: only partition 1 moved, partition 0 forgotten, partition 2 added.
    err, s2, parts = cache.begin(s.session_id, 1, False, [(("t", 1), cp(7)), (("t", 2), cp(0))], [("t", 0)], 1)
    assert err == 0 and s2 is s and s.epoch == 2
    got = dict(parts)
    assert set(got) == {("t", 1), ("t", 2)} and got[("t", 1)].fetch_offset == 7


def test_unknown_session_and_wrong_epoch() -> None:
    cache = FetchSessionCache()
    err, _, _ = cache.begin(12345, 1, False, [], [], 0)
    assert err == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    _, s, _ = cache.begin(0, 0, False, [(("t", 0), cp(0))], [], 0)
    err, _, _ = cache.begin(s.session_id, 5, False, [], [], 0)
    assert err == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_final_epoch_closes_session() -> None:
    cache = FetchSessionCache()
    _, s, _ = cache.begin(0, 0, False, [(("t", 0), cp(0))], [], 0)
    err, none, parts = cache.begin(s.session_id, -1, False, [(("t", 0), cp(3))], [], 0)
    assert err == 0 and none is None and len(cache) == 0 and dict(parts)[("t", 0)].fetch_offset == 3


def test_topic_id_mismatch_and_eviction() -> None:
    cache = FetchSessionCache(max_sessions=2, eviction_ms=1000)
    _, s, _ = cache.begin(0, 0, True, [], [], 0)
    err, _, _ = cache.begin(s.session_id, 1, False, [], [], 0)
    assert err == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    cache.begin(0, 0, False, [], [], 10)
    cache.begin(0, 0, False, [], [], 5000)  # evicts the idle ones
    assert len(cache) <= 2
