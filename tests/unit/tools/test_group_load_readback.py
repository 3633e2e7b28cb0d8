"""The group load generator's read-back: an offset above the acknowledged one is accepted only when a commit of
unknown outcome (no answer, or an error a failed append gives) carried it; lower is a lost commit."""
from __future__ import annotations

import asyncio
from typing import Any, List, Tuple

from broker.protocol.api import ApiKey, encode_response
from tools.bench.group_client import GroupMember, LoadStats, MemberConfig, _Retry
from tools.bench.group_load import LoadReport, _check


def test_read_back_classifies_each_partition() -> None:
    tp0, tp1, tp2, tp3, tp4 = (("t", p) for p in range(5))
    expected = {"g": {tp0: 5, tp1: 5, tp2: 5, tp3: 5, tp4: 5}}
    got = {"g": {tp0: 5,    # as acknowledged
                 tp1: 6,    # the commit in flight at the kill, applied
                 tp2: 7,    # higher, but no commit of unknown outcome carried 7
                 tp3: 4,    # lower: lost
                 tp4: 4}}   # lower, even though a commit of unknown outcome carried 4 (before the acked one)
    unknown = {"g": {tp1: {6}, tp2: {6}, tp4: {4}}}
    r = LoadReport(1, 1)
    _check(r, expected, got, unknown)
    assert (r.unacknowledged_applied, r.mismatched_offsets, r.lost_offsets) == (1, 3, 2)
    assert r.mismatch_examples == ["g t-2: acknowledged 5, read 7", "g t-3: acknowledged 5, read 4",
                                   "g t-4: acknowledged 5, read 4"]
    strict = LoadReport(1, 1)  # without knowing the unanswered commits, 6 is a mismatch too
    _check(strict, expected, got)
    assert (strict.unacknowledged_applied, strict.mismatched_offsets, strict.lost_offsets) == (0, 4, 2)


def _commit_answer(code: int) -> memoryview:
    frame = encode_response(ApiKey.OFFSET_COMMIT, 8, 1, {"throttle_time_ms": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "error_code": code},
                                     {"partition_index": 1, "error_code": code}]}]})[0]
    return memoryview(frame)[4:]


def test_member_records_commits_of_unknown_outcome() -> None:
    """Answers in turn: acknowledged, no answer (connection lost), acknowledged, REQUEST_TIMED_OUT, then
    ILLEGAL_GENERATION (refused before any write: not of unknown outcome). A commit not acknowledged is sent again
    with the same offsets."""
    answers: List[Any] = [0, None, 0, 7, 22]
    sent: List[Tuple[int, ...]] = []

    async def scenario() -> LoadStats:
        stats = LoadStats()
        m = GroupMember(None, "g", 0, ["t"], "c", stats, MemberConfig(commit_interval_ms=1))  # type: ignore[arg-type]
        m.assignment = {"t": [0, 1]}

        async def exchange(api: str, frame_of: Any, timeout_ms: Any = None) -> Tuple[memoryview, float]:
            sent.append(tuple(m.positions.get(("t", p), 0) + 1 for p in (0, 1)))
            code = answers.pop(0)
            if not answers:
                m._stopping = True
            if code is None:
                raise _Retry()
            return _commit_answer(code), 1.0

        m._exchange = exchange  # type: ignore[assignment]
        m._handle_group_error = lambda api, code: None  # type: ignore[assignment]
        await m._commit_loop()
        return stats

    stats = asyncio.run(scenario())
    assert sent == [(1, 1), (2, 2), (2, 2), (3, 3), (3, 3)]
    assert stats.acked == {("g", "t", 0): 2, ("g", "t", 1): 2}
    assert stats.unknown_outcome == {("g", "t", 0): {2, 3}, ("g", "t", 1): {2, 3}}
