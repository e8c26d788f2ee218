"""Typed memo keys: what sessions derive once from a snapshot or a job and reuse.

kube-scheduler's ``CycleState`` in miniature. A value is stored under a :class:`MemoKey` that
the module computing it owns and exports, so a reader names the key (and gets its type), never
a string another module happens to write. A snapshot's :attr:`~.snapshot.ClusterSnapshot.memo`
holds what depends on the snapshot alone; a job's :attr:`~.jobs.JobInfo.memo` what depends on
the job alone (and on the tree or configuration the value records). A snapshot's
:attr:`~.snapshot.ClusterSnapshot.carry`, shared by the snapshots of one incremental cache, holds
what a session derives from *every* job (per-queue sums, per-job shares): carried from one
snapshot to the next and patched for the jobs that changed (:func:`changed_entries`), so that
work follows the changes, not the number of jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
V = TypeVar("V")


class MemoKey(Generic[T]):
    """The key of one memoised value of type ``T``.

    ``node_free``: the value names no node index, so it stays true for a job whose running
    pods only moved to other indices (the cache keeps such values when nodes come and go)."""

    __slots__ = ("name", "node_free")

    def __init__(self, name: str, *, node_free: bool = False) -> None:
        self.name = name
        self.node_free = node_free

    def __repr__(self) -> str:
        return f"MemoKey({self.name!r})"


class Memo:
    """Values by :class:`MemoKey`."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[MemoKey[Any], Any] = {}

    def get(self, key: MemoKey[T]) -> T | None:
        """The value stored under ``key``, or None."""
        return cast("T | None", self._values.get(key))

    def put(self, key: MemoKey[T], value: T) -> T:
        """Store ``value`` under ``key`` and return it."""
        self._values[key] = value
        return value

    def get_or_put(self, key: MemoKey[T], make: Callable[[], T]) -> T:
        """The value under ``key``, made by ``make`` and stored the first time."""
        if key in self._values:
            return cast("T", self._values[key])
        return self.put(key, make())

    def clear(self) -> None:
        """Forget every value (a cold start, as benchmarks measure one)."""
        self._values.clear()

    def node_free(self) -> Memo:
        """A copy holding only the values whose keys are ``node_free``."""
        out = Memo()
        out._values = {k: v for k, v in self._values.items() if k.node_free}
        return out


def changed_entries(before: Mapping[str, V], now: Mapping[str, V]) -> tuple[list[tuple[str, V]], list[str]]:
    """``(entries of now that are new or another object than in before, keys of before gone
    from now)``. Values are compared by identity: the cache hands an unchanged job to the next
    snapshot as the same object, and a snapshot never changes one."""
    changed = [(k, v) for k, v in now.items() if before.get(k) is not v]
    new = sum(1 for k, _ in changed if k not in before)
    if len(before) == len(now) - new:
        return changed, []  # every key of before is still there
    return changed, [k for k in before if k not in now]
