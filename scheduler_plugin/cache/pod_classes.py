"""Pods as inter-pod affinity and topology spread see them: the label keys some term of the
cluster reads, each pod's class (its namespace and the labels under those keys), and the bound
pods grouped by class with their nodes.

Two pending pods that differ only in labels no term reads (a per-pod index, a pod name) are
the same to both filters, so they may share a shape; pods a term can tell apart may not. The
shape signature therefore carries the pod's class whenever some pod of the cluster has a term,
and the cache lays shapes out afresh when the set of keys read changes (rare: a new kind of
workload)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ..filters.plugin import PredicateError
from ..filters.pod_terms import NO_TERMS, PodClass, PodTerms, compile_pod_terms, pod_class

I64 = npt.NDArray[np.int64]
LabelClass = tuple[str, tuple[tuple[str, str], ...]] | None


def has_terms(obj: Mapping[str, Any]) -> bool:
    """Whether the pod carries inter-pod affinity or topology spread terms (a cheap look)."""
    spec = obj.get("spec") or {}
    aff = spec.get("affinity") or {}
    return bool(aff.get("podAffinity") or aff.get("podAntiAffinity") or spec.get("topologySpreadConstraints"))


def terms_of(obj: Mapping[str, Any]) -> PodTerms:
    """The pod's compiled terms; none for a pod whose terms cannot be read (a pending pod of
    ours is refused for them with the field named, see ``PodConstraints.error``)."""
    if not has_terms(obj):
        return NO_TERMS
    try:
        return compile_pod_terms(obj)
    except PredicateError:
        return NO_TERMS


class TermKeys:
    """How many pods with terms there are and, per label key, how many of their terms read it."""

    def __init__(self) -> None:
        self._keys: Counter[str] = Counter()
        self._pods = 0

    def add(self, terms: PodTerms, sign: int) -> bool:
        """Count (sign=1) or uncount a pod's terms; True when the keys read, or whether any pod
        has terms, changed (shapes must then be laid out afresh)."""
        if terms is NO_TERMS or not terms.any():
            return False
        before = self._pods > 0
        self._pods += sign
        changed = before != (self._pods > 0)
        for k in terms.label_keys():
            self._keys[k] += sign
            if self._keys[k] <= 0:
                del self._keys[k]
                changed = True
            elif sign > 0 and self._keys[k] == 1:
                changed = True
        return changed

    @property
    def active(self) -> bool:
        """Some pod of the cluster has a term."""
        return self._pods > 0

    def keys(self) -> frozenset[str]:
        """The label keys some term reads."""
        return frozenset(self._keys)


def label_class(namespace: str, labels: Mapping[str, str], keys: TermKeys) -> LabelClass:
    """What a shape signature adds for the two filters: None while no pod has a term."""
    if not keys.active:
        return None
    kept = keys.keys()
    return namespace, tuple(sorted((k, v) for k, v in labels.items() if k in kept))


def group_bound(pods: Iterable[tuple[PodClass, int]]) -> list[tuple[PodClass, I64]]:
    """Bound pods ``(class, node index)`` grouped by class, with the node index of each pod."""
    by: dict[PodClass, list[int]] = {}
    for c, n in pods:
        by.setdefault(c, []).append(n)
    return [(c, np.asarray(ns, dtype=np.int64)) for c, ns in by.items()]


def bound_class(obj: Mapping[str, Any], terms: PodTerms, keys: TermKeys) -> PodClass:
    """The class of a bound pod: namespace, labels under the keys read, terms, deleting."""
    meta = obj.get("metadata") or {}
    return pod_class(
        str(meta.get("namespace") or "default"),
        {str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        keys.keys(),
        terms,
        bool(meta.get("deletionTimestamp")),
    )


class BoundClasses:
    """The bound pods by class, kept from pod events (the incremental state's side of
    :func:`group_bound`): a cycle pays for the classes whose pods changed, not for every pod."""

    def __init__(self, keys: TermKeys) -> None:
        self.keys = keys
        self._built_for: frozenset[str] | None = None  # the keys the classes were made with
        self._of: dict[str, tuple[PodClass, str]] = {}  # pod key -> (class, node name)
        self._nodes: dict[PodClass, Counter[str]] = {}
        self._arrays: dict[PodClass, I64] = {}
        self._dirty: set[PodClass] = set()
        self._nodeset: int | None = None

    def track(self, key: str, obj: Mapping[str, Any] | None, node: str | None, terms: PodTerms) -> None:
        """A pod changed (``obj`` None: gone, or no longer bound and running)."""
        if self._built_for is None or not self.keys.active:
            return  # made from scratch when next asked
        old = self._of.pop(key, None)
        if old is not None:
            self._remove(*old)
        if obj is not None and node:
            c = bound_class(obj, terms, self.keys)
            self._of[key] = (c, node)
            self._nodes.setdefault(c, Counter())[node] += 1
            self._dirty.add(c)

    def _remove(self, c: PodClass, node: str) -> None:
        per = self._nodes[c]
        per[node] -= 1
        if per[node] <= 0:
            del per[node]
        self._dirty.add(c)

    def arrays(
        self,
        nidx: Mapping[str, int],
        nodeset: int,
        pods: Iterable[tuple[str, Mapping[str, Any], str, PodTerms]],
    ) -> list[tuple[PodClass, I64]]:
        """Every class with the node index of each of its pods (pods on a node with no Node
        object left out). ``pods`` (key, object, node, terms of every bound pod) is read only
        when the keys read changed since the last call."""
        if not self.keys.active:
            self._built_for = None
            return []
        keys = self.keys.keys()
        if self._built_for != keys:
            self._built_for = keys
            self._of, self._nodes, self._arrays = {}, {}, {}
            for key, obj, node, terms in pods:
                c = bound_class(obj, terms, self.keys)
                self._of[key] = (c, node)
                self._nodes.setdefault(c, Counter())[node] += 1
            self._dirty = set(self._nodes)
        if self._nodeset != nodeset:
            self._nodeset = nodeset
            self._dirty = set(self._nodes)
        for c in self._dirty:
            per = self._nodes.get(c)
            if not per:
                self._nodes.pop(c, None)
                self._arrays.pop(c, None)
                continue
            idx = [nidx[n] for n, k in per.items() if n in nidx for _ in range(k)]
            self._arrays[c] = np.asarray(idx, dtype=np.int64)
        self._dirty = set()
        return [(c, a) for c, a in self._arrays.items() if len(a)]
