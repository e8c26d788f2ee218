"""The simulated API server's objects: wire-form dicts keyed by ``(kind, namespace, name)``."""

from __future__ import annotations

from typing import Any

from .loader import kind_key

Key = tuple[str, str, str]  # (kind, namespace or "", name)


def key_of(obj: dict[str, Any]) -> Key:
    """``(kind, namespace or "", name)`` of a wire object."""
    meta = obj.get("metadata") or {}
    return (kind_key(obj), str(meta.get("namespace") or ""), str(meta.get("name", "")))


class ObjectStore(dict[Key, dict[str, Any]]):
    """The simulated API server's objects, with keys indexed by kind (so listing one kind
    costs the objects of that kind, not every object: admission lists HyperNodes and Jobs
    after each of them, which was quadratic on large inputs). Iteration order is a dict's.

    Every store, replacement and removal is logged per kind, so a reader that keeps up with
    a kind (the admission caches, HyperNode status) reads only what changed since it last
    looked. Callers change stored objects in place only for status."""

    def __init__(self) -> None:
        super().__init__()
        self._by_kind: dict[str, dict[Key, None]] = {}
        self._changes: dict[str, list[Key]] = {}

    def _changed(self, key: Key) -> None:
        self._changes.setdefault(key[0], []).append(key)

    def __setitem__(self, key: Key, value: dict[str, Any]) -> None:
        if key not in self:
            self._by_kind.setdefault(key[0], {})[key] = None
        self._changed(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Key) -> None:
        super().__delitem__(key)
        self._by_kind[key[0]].pop(key, None)
        self._changed(key)

    def pop(self, key: Key, *default: Any) -> Any:
        """dict.pop, keeping the kind index."""
        if key in self:
            self._by_kind[key[0]].pop(key, None)
            self._changed(key)
        return super().pop(key, *default)

    def setdefault(self, key: Key, default: Any = None) -> Any:
        """dict.setdefault, keeping the kind index."""
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        """dict.update, keeping the kind index."""
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def popitem(self) -> Any:
        """Not used; refused rather than leaving the index stale."""
        raise NotImplementedError

    def clear(self) -> None:
        """dict.clear, with the index."""
        for key in self:
            self._changed(key)
        super().clear()
        self._by_kind.clear()

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Objects of one kind, in insertion order."""
        return [self[k] for k in self._by_kind.get(kind, ())]

    def version(self, kind: str) -> int:
        """How many times objects of ``kind`` were stored, replaced or removed: a kind whose
        version has not moved still holds the same objects."""
        return len(self._changes.get(kind, ()))

    def changed_since(self, kind: str, version: int) -> list[Key]:
        """Keys of ``kind`` stored, replaced or removed since :meth:`version` was ``version``,
        in order (a key once per change)."""
        return self._changes.get(kind, [])[version:]
