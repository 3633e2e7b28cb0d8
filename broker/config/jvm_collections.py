"""The iteration order (and ``toString``) of the Java and Scala 2.13 collections Kafka prints in config errors.

Kafka 3.9's DynamicBrokerConfig words a refused dynamic config change as ``<reason>: <a Scala Set>``, e.g.
``Cannot update these configs dynamically: Set(broker.id, log.dirs)``. Which keys are named, in which order and
whether the set prints as ``Set(...)`` or ``HashSet(...)`` follow from the collections the keys pass through:

- the request's keys go into a ``java.util.Properties`` (a ``ConcurrentHashMap`` inside), are copied through
  ``HashMap``s by ``AbstractConfig`` (``DynamicBrokerConfig.resolveVariableConfigs``) into a new ``Properties``;
- Scala's immutable ``Set`` builder keeps up to four elements in insertion order (``Set1``..``Set4``, printed
  ``Set(...)``) and turns into a CHAMP ``HashSet`` at five (printed ``HashSet(...)``, in trie order);
- ``filter`` on a wrapped Java set builds a ``mutable.HashSet`` (printed ``HashSet(...)``, in bucket order).

Each structure is simulated from Java's ``String.hashCode`` (tests/unit/config/test_jvm_collections.py holds
answers taken from the JVM).
"""
from __future__ import annotations

from typing import Iterable, List, Sequence

from broker.util.java_hash import java_string_hash_code

_M32 = 0xFFFFFFFF


def _u32(h: int) -> int:
    return h & _M32


def _s32(h: int) -> int:
    h &= _M32
    return h - (1 << 32) if h & 0x80000000 else h


def _table_size_for(c: int) -> int:
    n = 1
    while n < c:
        n <<= 1
    return max(n, 1)


def _spread(key: str) -> int:
    """HashMap.hash / ConcurrentHashMap.spread (the sign bit never reaches a table index)."""
    h = _u32(java_string_hash_code(key))
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def _hash_map_copy(keys: Sequence[str], initial_capacity: int | None = None) -> List[str]:
    """Iteration order of a ``java.util.HashMap`` filled with ``keys`` in order: ``new HashMap<>(n)`` when
    ``initial_capacity`` is given, else ``new HashMap<>()`` followed by ``putAll`` of a map of that size."""
    s = len(keys)
    if s == 0:
        return []
    if initial_capacity is not None:
        cap = _table_size_for(initial_capacity)
    else:  # putMapEntries on an empty map: threshold = tableSizeFor(s / 0.75 + 1)
        cap = _table_size_for(int(s / 0.75 + 1.0))
    bins: List[List[str]] = [[] for _ in range(cap)]
    size = 0
    for k in keys:
        bins[_spread(k) & (cap - 1)].append(k)
        size += 1
        if size > int(cap * 0.75):  # resize: each bin splits into lo and hi, both keeping their order
            new: List[List[str]] = [[] for _ in range(cap * 2)]
            for i, b in enumerate(bins):
                for key in b:
                    new[i + cap if _spread(key) & cap else i].append(key)
            bins, cap = new, cap * 2
    return [k for b in bins for k in b]


def _concurrent_hash_map_fill(keys: Sequence[str], capacity: int = 16) -> List[str]:
    """Iteration order of a ``ConcurrentHashMap`` (a ``Properties``' map, table 16) filled with ``keys`` one by
    one, resizes included (``transfer`` moves the nodes ahead of a bin's last run in reverse order)."""
    n = capacity
    bins: List[List[str]] = [[] for _ in range(n)]
    count = 0
    for k in keys:
        bins[_spread(k) & (n - 1)].append(k)
        count += 1
        if count >= n - (n >> 2):
            new: List[List[str]] = [[] for _ in range(n * 2)]
            for i, b in enumerate(bins):
                if not b:
                    continue
                run_bit = _spread(b[0]) & n
                last_run = 0
                for j in range(1, len(b)):
                    bit = _spread(b[j]) & n
                    if bit != run_bit:
                        run_bit, last_run = bit, j
                lo: List[str] = list(b[last_run:]) if run_bit == 0 else []
                hi: List[str] = list(b[last_run:]) if run_bit != 0 else []
                for key in b[:last_run]:
                    if _spread(key) & n == 0:
                        lo.insert(0, key)
                    else:
                        hi.insert(0, key)
                new[i], new[i + n] = lo, hi
            bins, n = new, n * 2
    return [k for b in bins for k in b]


def resolved_properties_order(keys_in_insertion_order: Iterable[str]) -> List[str]:
    """The iteration order of the ``Properties`` that DynamicBrokerConfig.validate checks, given the order the
    keys were put into the request's ``Properties``: that Properties -> ``Utils.castToStringObjectMap``
    (``new HashMap<>(size)``) -> ``AbstractConfig.resolveConfigVariables`` (``HashMap.putAll``, then
    ``ResolvingMap``'s copy) -> ``originals()`` (a ``RecordingMap``) -> ``resolveVariableConfigs``' new
    Properties."""
    order = _concurrent_hash_map_fill(list(dict.fromkeys(keys_in_insertion_order)))
    order = _hash_map_copy(order, initial_capacity=len(order))
    for _ in range(3):  # resolvedOriginals.putAll, new ResolvingMap(resolved), new RecordingMap().putAll
        order = _hash_map_copy(order)
    return _concurrent_hash_map_fill(order)


# --- Scala 2.13 -----------------------------------------------------------------------------------------------
def _improve(h: int) -> int:
    """scala.collection.Hashing.improve (the CHAMP HashSet's hash)."""
    h = _s32(h + ~(h << 9))
    h = _s32(h ^ (_u32(h) >> 14))
    h = _s32(h + (h << 4))
    return _s32(h ^ (_u32(h) >> 10))


def _champ_order(elems: Sequence[str]) -> List[str]:
    """Iteration order of a ``scala.collection.immutable.HashSet``: at each trie level the elements stored in the
    node, by their 5-bit hash fragment, then the sub-nodes by fragment, depth first."""
    items = [(e, _u32(_improve(java_string_hash_code(e)))) for e in dict.fromkeys(elems)]

    def walk(group: List[tuple], shift: int) -> List[str]:
        if shift >= 32 or len(group) == 1:
            return [e for e, _ in group]
        by_frag: dict = {}
        for e, h in group:
            by_frag.setdefault((h >> shift) & 0x1F, []).append((e, h))
        payload = [g[0][0] for _, g in sorted(by_frag.items()) if len(g) == 1]
        out = list(payload)
        for _, g in sorted(by_frag.items()):
            if len(g) > 1:
                out.extend(walk(g, shift + 5))
        return out

    return walk(items, 0)


def scala_immutable_set(elems_in_order: Iterable[str]) -> str:
    """``toString`` of a Scala 2.13 immutable Set built by adding the elements in order (``Set(...)`` up to four
    elements, kept in insertion order; ``HashSet(...)`` from five on, in trie order)."""
    elems = list(dict.fromkeys(elems_in_order))
    if len(elems) <= 4:
        return f"Set({', '.join(elems)})"
    return f"HashSet({', '.join(_champ_order(elems))})"


def scala_mutable_hash_set(elems: Iterable[str]) -> str:
    """``toString`` of a Scala 2.13 ``mutable.HashSet`` (default capacity 16): buckets by
    ``hash ^ (hash >>> 16)``, each bucket ordered by that hash."""
    items = list(dict.fromkeys(elems))
    cap = 16
    while len(items) >= int(cap * 0.75):  # addElem grows the table when contentSize + 1 reaches the threshold
        cap *= 2

    def improved(e: str) -> int:
        h = java_string_hash_code(e)
        return _s32(h ^ (_u32(h) >> 16))

    ordered = sorted(items, key=lambda e: (improved(e) & (cap - 1), improved(e)))
    return f"HashSet({', '.join(ordered)})"


__all__ = ["resolved_properties_order", "scala_immutable_set", "scala_mutable_hash_set"]
