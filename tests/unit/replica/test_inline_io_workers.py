"""The inline I/O executor (``ReplicaManager(io_threads=0)``, what the replica unit tests run on) gives the results
and delivers the exceptions the threaded workers do, so a test on it tests the broker's code paths; its futures are
done when submitted, and the calling thread is every log's owner."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Iterator, List, Union

import pytest

from broker.replica.io_workers import InlineIoWorkers, IoWorkers

Workers = Union[IoWorkers, InlineIoWorkers]


@pytest.fixture(params=["threads", "inline"])
def workers(request: pytest.FixtureRequest) -> Iterator[Workers]:
    w: Workers = IoWorkers(2) if request.param == "threads" else InlineIoWorkers()
    yield w
    w.shutdown()


def _half(x: int) -> int:
    if x % 3 == 0:
        raise ValueError("item %d" % x)
    return x // 2


def _outcomes(outcomes: List[Any]) -> List[Any]:
    return [(r, str(e) if e is not None else None) for r, e in outcomes]


def test_submit_delivers_the_result_and_the_exception_into_the_future(workers: Workers) -> None:
    async def main() -> None:
        assert await workers.submit(_half, 8, key=("t", 0)) == 4
        with pytest.raises(ValueError, match="item 9"):
            await workers.submit(_half, 9, key=("t", 0))
        with pytest.raises(ValueError, match="item 3"):
            await workers.submit(_half, 3)  # no key: any worker

    asyncio.run(main())


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_submit_each_and_run_each_give_each_item_its_own_outcome_in_order(workers: Workers,
                                                                          one_at_a_time: bool) -> None:
    async def main() -> None:
        items = list(range(1, 30))
        keys = [("t", i % 7) for i in items]
        expected = [(None, "item %d" % i) if i % 3 == 0 else (i // 2, None) for i in items]
        assert _outcomes(await workers.run_each(_half, items, keys, chunk_size=4, one_at_a_time=one_at_a_time)) \
            == expected
        out: List[Any] = [None] * len(items)
        jobs = workers.submit_each(_half, items, keys, chunk_size=4, one_at_a_time=one_at_a_time)
        assert sorted(i for indexes, _ in jobs for i in indexes) == list(range(len(items)))
        for indexes, fut in jobs:
            for i, outcome in zip(indexes, await fut):
                out[i] = outcome
        assert _outcomes(out) == expected

    asyncio.run(main())


def test_call_and_call_each_return_results_and_raise_or_hand_back_exceptions(workers: Workers) -> None:
    assert workers.call(("t", 1), lambda: 42) == 42
    with pytest.raises(ValueError, match="item 6"):
        workers.call(("t", 1), lambda: _half(6))
    keys = [("t", i) for i in range(10)]
    got = workers.call_each(keys, lambda tp: _half(tp[1]))
    assert _outcomes(got) == [(None, "item %d" % i) if i % 3 == 0 else (i // 2, None) for i in range(10)]


def test_inline_jobs_run_at_once_on_the_calling_thread_which_owns_every_log() -> None:
    before = set(threading.enumerate())
    w = InlineIoWorkers()

    async def main() -> None:
        ran: List[int] = []
        fut = w.submit(lambda: ran.append(threading.get_ident()) or len(ran), key=("t", 0))
        assert fut.done() and ran == [threading.get_ident()]  # no loop turn, no thread
        assert await fut == 1
        jobs = w.submit_each(_half, [1, 3], [("t", 0), ("t", 1)])
        assert all(f.done() for _, f in jobs)

    asyncio.run(main())
    assert w.is_owner(("t", 0)) and w.is_owner(("u", 9))
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("io-")]  # it started none
