"""The follower's side of incremental fetch sessions (KIP-227), as Kafka's FetchSessionHandler.

A replica fetcher's first request (epoch 0) carries every partition it fetches and opens a session on the
leader; each later one (epoch 1, 2, ...) carries only the partitions whose fetch position changed since the
previous request (offset, leader epoch, last fetched epoch, log start offset), and lists under ``forgotten``
those it no longer fetches. The leader keeps the rest, and answers only with partitions that have news
(records, a moved high watermark or log start offset, an error). An idle follower of 3,333 partitions then
sends and receives almost empty Fetches instead of 3,333 entries each way twice a second.

Any failure (an error answer, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, a lost connection) makes
the next request a full one that replaces the session; a leader that cannot keep a session (session id 0 in its
answer) gets full requests every time, as a sessionless fetch. Pure state: no I/O.
"""
from __future__ import annotations

from typing import Dict, Hashable, Iterable, List, Mapping, Optional, Tuple

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
MAX_EPOCH = 2**31 - 1

TopicPartition = Tuple[str, int]


class FetchSessionHandler:
    """Which partitions the next Fetch must carry; ``data`` is any comparable value per partition (what the
    request sends for it): a partition is resent when its value changed."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: what the leader's session holds for each partition (as of the last answered request)
        self._session: Dict[TopicPartition, Hashable] = {}
        #: what the leader's session will hold once the request last built is answered: a whole map (full
        #: request) or the changes to apply (partition -> new value, or _ABSENT to forget it)
        self._next: Optional[Dict[TopicPartition, Hashable]] = None
        self._next_is_delta = False

    @property
    def is_full(self) -> bool:
        """Whether the next request is a full one (opens or replaces the session)."""
        return self.epoch == INITIAL_EPOCH

    def sent(self, tp: TopicPartition) -> Optional[Hashable]:
        """What the leader's session holds for ``tp`` (None if it is not in the session)."""
        return self._session.get(tp)

    def build(self, wanted: Mapping[TopicPartition, Hashable], changed: Optional[Iterable[TopicPartition]] = None
              ) -> Tuple[List[TopicPartition], List[TopicPartition]]:
        """(partitions to send, partitions to forget) for a request fetching exactly ``wanted``.

        ``changed``: the only partitions whose value may differ from the session's (added, removed, moved) since
        the last request; an incremental request then costs what changed, not the session's size. None: compare
        every partition."""
        if self.is_full:
            self._next, self._next_is_delta = dict(wanted), False
            return list(wanted), []
        session = self._session
        if changed is None:
            changed = set(wanted).union(session)
        send: List[TopicPartition] = []
        forget: List[TopicPartition] = []
        delta: Dict[TopicPartition, Hashable] = {}
        for tp in sorted(changed):
            data = wanted.get(tp, _ABSENT)
            if data is _ABSENT:
                if tp in session:
                    forget.append(tp)
                    delta[tp] = _ABSENT
            elif session.get(tp, _ABSENT) != data:
                send.append(tp)
                delta[tp] = data
        self._next, self._next_is_delta = delta, True
        return send, forget

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Record the answer to the request last built; False (and a full request next) on an error."""
        if error_code:
            self.handle_error()
            return False
        if self.is_full:
            if session_id == INVALID_SESSION_ID:
                self._session = {}  # the leader keeps no session: full requests from now on
            else:
                self.session_id = session_id
                self.epoch = 1
                self._session = self._next or {}
        else:
            self.epoch = self.epoch + 1 if self.epoch < MAX_EPOCH else 1
            if self._next_is_delta:
                for tp, data in (self._next or {}).items():
                    if data is _ABSENT:
                        self._session.pop(tp, None)
                    else:
                        self._session[tp] = data
            else:
                self._session = self._next or {}
        self._next = None
        return True

    def handle_error(self) -> None:
        """The request failed or its answer was lost: the next one replaces the session (Kafka closes the existing
        one and opens a new one in the same request: the session id with epoch 0)."""
        self.epoch = INITIAL_EPOCH
        self._session = {}
        self._next = None


class _Absent:
    __slots__ = ()


_ABSENT = _Absent()
