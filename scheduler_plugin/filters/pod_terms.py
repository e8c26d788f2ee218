"""What InterPodAffinity and PodTopologySpread read of a pod, compiled once: label selectors,
affinity terms and spread constraints, with kube-scheduler's semantics; and the topology
domains of the nodes per topology key, indexed once per cycle.

Selectors are kept in a frozen, hashable form so a compiled term can be part of a shape's
signature and memoised per pod class."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from .nodes import NodeStatic
from .plugin import I64, PredicateError

# A requirement: (key, operator, values).
Requirement = tuple[str, str, tuple[str, ...]]
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_T = TypeVar("_T")


def cached_hash(cls: type[_T]) -> type[_T]:
    """Keeps a frozen dataclass's hash once computed: classes and terms are dictionary keys
    cycle after cycle, and hashing their nested tuples again each time costs more than the
    lookups (a cluster has thousands of pod classes). The cached value is left out of pickles,
    since string hashes differ between processes."""
    inner = cls.__hash__

    def __hash__(self: Any) -> int:
        d = self.__dict__
        h = d.get("_hash")
        if h is None:
            h = inner(self)
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self: Any) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    setattr(cls, "__hash__", __hash__)  # noqa: B010 - mypy refuses assigning a method
    setattr(cls, "__getstate__", __getstate__)  # noqa: B010
    return cls


@cached_hash
@dataclass(frozen=True)
class Selector:
    """A compiled ``metav1.LabelSelector``. ``nothing``: a nil selector, which matches no
    pod (``LabelSelectorAsSelector(nil)``); an empty one matches every pod."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every requirement."""
        if self.nothing:
            return False
        for key, op, values in self.requirements:
            if op == "In":
                if labels.get(key) not in values:
                    return False
            elif op == "NotIn":
                if key in labels and labels[key] in values:
                    return False
            elif op == "Exists":
                if key not in labels:
                    return False
            elif key in labels:  # DoesNotExist
                return False
        return True

    @property
    def empty(self) -> bool:
        """No requirement at all (``labels.Everything()``)."""
        return not self.nothing and not self.requirements

    def keys(self) -> frozenset[str]:
        """The label keys the selector reads."""
        return frozenset(r[0] for r in self.requirements)


NOTHING = Selector(nothing=True)


def compile_selector(raw: Any, path: str) -> Selector:
    """A LabelSelector in wire form; a malformed one is a :class:`PredicateError` naming ``path``
    (the API server refuses such pods, so only hand-made input gets here)."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise PredicateError(f"{path}: must be a label selector object, got {raw!r}")
    reqs: list[Requirement] = []
    for k, v in sorted((raw.get("matchLabels") or {}).items()):
        reqs.append((str(k), "In", (str(v),)))
    for i, e in enumerate(raw.get("matchExpressions") or []):
        op = str(e.get("operator", ""))
        key = str(e.get("key", ""))
        values = tuple(sorted(str(v) for v in e.get("values") or []))
        where = f"{path}.matchExpressions[{i}]"
        if op not in _OPERATORS:
            raise PredicateError(f"{where}.operator: {op!r} is not a valid label selector operator")
        if op in ("In", "NotIn") and not values:
            raise PredicateError(f"{where}.values: must be specified when `operator` is {op!r}")
        if op in ("Exists", "DoesNotExist") and values:
            raise PredicateError(f"{where}.values: may not be specified when `operator` is {op!r}")
        reqs.append((key, op, values))
    return Selector(tuple(reqs))


def with_label_keys(
    sel: Selector, labels: Mapping[str, str], match: Sequence[str], mismatch: Sequence[str] = ()
) -> Selector:
    """``matchLabelKeys`` / ``mismatchLabelKeys`` merged into the selector as ``key in (value)``
    / ``key notin (value)`` for the keys the pod carries (what the API server writes into the
    selector at creation; merging again adds the same requirement, so it is harmless)."""
    if sel.nothing:
        return sel
    extra = [(k, "In", (labels[k],)) for k in match if k in labels]
    extra += [(k, "NotIn", (labels[k],)) for k in mismatch if k in labels]
    if not extra:
        return sel
    return Selector(tuple(dict.fromkeys((*sel.requirements, *extra))))


@cached_hash
@dataclass(frozen=True)
class AffinityTerm:
    """One PodAffinityTerm: pods matching ``selector`` in the term's namespaces, counted per
    value of ``topology_key`` on their nodes."""

    topology_key: str
    selector: Selector
    namespaces: frozenset[str]
    # None: no namespaceSelector; an empty selector selects every namespace.
    namespace_selector: Selector | None = None

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str]) -> bool:
        """kube's ``AffinityTerm.Matches``: the pod's namespace is one of the term's (listed or
        selected by label) and its labels match the selector."""
        if namespace not in self.namespaces and not (
            self.namespace_selector is not None and self.namespace_selector.matches(ns_labels)
        ):
            return False
        return self.selector.matches(labels)

    def keys(self) -> frozenset[str]:
        """The pod label keys the term reads."""
        return self.selector.keys()


def compile_affinity_terms(
    raw_terms: Any, path: str, namespace: str, labels: Mapping[str, str]
) -> tuple[AffinityTerm, ...]:
    """Required PodAffinityTerms (or the ``podAffinityTerm`` of weighted ones, already
    unwrapped by the caller). With neither ``namespaces`` nor ``namespaceSelector`` a term
    means the pod's own namespace."""
    out: list[AffinityTerm] = []
    for i, t in enumerate(raw_terms or []):
        where = f"{path}[{i}]"
        if not isinstance(t, Mapping):
            raise PredicateError(f"{where}: must be a pod affinity term, got {t!r}")
        key = str(t.get("topologyKey") or "")
        if not key:
            raise PredicateError(f"{where}.topologyKey: Required value: can not be empty")
        sel = compile_selector(t.get("labelSelector"), f"{where}.labelSelector")
        sel = with_label_keys(sel, labels, t.get("matchLabelKeys") or (), t.get("mismatchLabelKeys") or ())
        nss = frozenset(str(n) for n in t.get("namespaces") or ())
        raw_ns_sel = t.get("namespaceSelector")
        ns_sel = None if raw_ns_sel is None else compile_selector(raw_ns_sel, f"{where}.namespaceSelector")
        if not nss and ns_sel is None:
            nss = frozenset((namespace,))
        out.append(AffinityTerm(key, sel, nss, ns_sel))
    return tuple(out)


@cached_hash
@dataclass(frozen=True)
class SpreadConstraint:
    """One TopologySpreadConstraint, with its defaults filled in."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule
    selector: Selector
    min_domains: int = 1
    honor_node_affinity: bool = True  # nodeAffinityPolicy (default Honor)
    honor_taints: bool = False  # nodeTaintsPolicy (default Ignore)


def compile_spread(raw: Any, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """``spec.topologySpreadConstraints``; a constraint the API server would refuse is a
    :class:`PredicateError` naming its field."""
    out: list[SpreadConstraint] = []
    for i, c in enumerate(raw or []):
        where = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(c, Mapping):
            raise PredicateError(f"{where}: must be a topology spread constraint, got {c!r}")
        skew = c.get("maxSkew")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew <= 0:
            raise PredicateError(f"{where}.maxSkew: must be greater than zero, got {skew!r}")
        key = str(c.get("topologyKey") or "")
        if not key:
            raise PredicateError(f"{where}.topologyKey: Required value: can not be empty")
        when = c.get("whenUnsatisfiable") or "DoNotSchedule"
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise PredicateError(f"{where}.whenUnsatisfiable: Unsupported value: {when!r}")
        min_domains = c.get("minDomains")
        if min_domains is not None and (
            isinstance(min_domains, bool) or not isinstance(min_domains, int) or min_domains <= 0
        ):
            raise PredicateError(f"{where}.minDomains: must be greater than zero, got {min_domains!r}")
        policies = {}
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            v = c.get(name) or default
            if v not in ("Honor", "Ignore"):
                raise PredicateError(f"{where}.{name}: Unsupported value: {v!r}")
            policies[name] = v == "Honor"
        sel = compile_selector(c.get("labelSelector"), f"{where}.labelSelector")
        sel = with_label_keys(sel, labels, c.get("matchLabelKeys") or ())
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=key,
                hard=when == "DoNotSchedule",
                selector=sel,
                min_domains=1 if min_domains is None else min_domains,
                honor_node_affinity=policies["nodeAffinityPolicy"],
                honor_taints=policies["nodeTaintsPolicy"],
            )
        )
    return tuple(out)


@cached_hash
@dataclass(frozen=True)
class PodTerms:
    """A pod's inter-pod affinity and spread terms (empty tuples when it has none)."""

    affinity: tuple[AffinityTerm, ...] = ()  # required podAffinity
    anti_affinity: tuple[AffinityTerm, ...] = ()  # required podAntiAffinity
    preferred_affinity: tuple[tuple[int, AffinityTerm], ...] = ()
    preferred_anti_affinity: tuple[tuple[int, AffinityTerm], ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        """The DoNotSchedule constraints (the only ones that filter)."""
        return tuple(c for c in self.spread if c.hard)

    @property
    def soft_spread(self) -> tuple[SpreadConstraint, ...]:
        """The ScheduleAnyway constraints (the ones that only score)."""
        return tuple(c for c in self.spread if not c.hard)

    @property
    def preferred(self) -> tuple[tuple[int, AffinityTerm], ...]:
        """The preferred terms with signed weights: affinity adds, anti-affinity takes off."""
        return (*self.preferred_affinity, *((-w, t) for w, t in self.preferred_anti_affinity))

    def any(self) -> bool:
        """Whether the pod carries any term at all."""
        return bool(
            self.affinity
            or self.anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
            or self.spread
        )

    def label_keys(self) -> frozenset[str]:
        """Every pod label key the terms read (what the pod classes of a cycle keep)."""
        keys: set[str] = set()
        for t in (*self.affinity, *self.anti_affinity):
            keys |= t.keys()
        for _, t in (*self.preferred_affinity, *self.preferred_anti_affinity):
            keys |= t.keys()
        for c in self.spread:
            keys |= c.selector.keys()
        return frozenset(keys)


NO_TERMS = PodTerms()


def _preferred(
    raw: Any, path: str, namespace: str, labels: Mapping[str, str]
) -> tuple[tuple[int, AffinityTerm], ...]:
    out: list[tuple[int, AffinityTerm]] = []
    for i, w in enumerate(raw or []):
        where = f"{path}[{i}]"
        if not isinstance(w, Mapping):
            raise PredicateError(f"{where}: must be a weighted pod affinity term, got {w!r}")
        weight = w.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise PredicateError(f"{where}.weight: must be in the range 1-100, got {weight!r}")
        (term,) = compile_affinity_terms(
            [w.get("podAffinityTerm") or {}], f"{where}.podAffinityTerm", namespace, labels
        )
        out.append((weight, term))
    return tuple(out)


def compile_pod_terms(pod: Mapping[str, Any]) -> PodTerms:
    """The pod's inter-pod affinity and topology spread terms (PreFilter's parse)."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    affinity = spec.get("affinity") or {}
    pa = affinity.get("podAffinity") or {}
    paa = affinity.get("podAntiAffinity") or {}
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    terms = PodTerms(
        affinity=compile_affinity_terms(pa.get(req), f"spec.affinity.podAffinity.{req}", namespace, labels),
        anti_affinity=compile_affinity_terms(
            paa.get(req), f"spec.affinity.podAntiAffinity.{req}", namespace, labels
        ),
        preferred_affinity=_preferred(pa.get(pref), f"spec.affinity.podAffinity.{pref}", namespace, labels),
        preferred_anti_affinity=_preferred(
            paa.get(pref), f"spec.affinity.podAntiAffinity.{pref}", namespace, labels
        ),
        spread=compile_spread(spec.get("topologySpreadConstraints"), labels),
    )
    return terms if terms.any() else NO_TERMS


@cached_hash
@dataclass(frozen=True)
class PodClass:
    """A bound or placed pod as the two filters see it: its namespace, the labels any term of
    the cycle reads, its required anti-affinity terms, whether it is being deleted
    (PodTopologySpread does not count those), and the terms with which it scores an incoming
    pod (its required affinity, kube's ``hardPodAffinityWeight``, and its preferred terms with
    signed weights). Pods of one class are counted together."""

    namespace: str
    labels: tuple[tuple[str, str], ...]
    anti_affinity: tuple[AffinityTerm, ...] = ()
    deleting: bool = False
    affinity: tuple[AffinityTerm, ...] = ()
    preferred: tuple[tuple[int, AffinityTerm], ...] = ()
    _labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        self._labels.update(self.labels)

    @property
    def label_map(self) -> Mapping[str, str]:
        """The labels as a mapping."""
        return self._labels


def pod_class(
    namespace: str,
    labels: Mapping[str, str],
    keys: frozenset[str],
    terms: PodTerms | None = None,
    deleting: bool = False,
) -> PodClass:
    """The class of a pod whose labels are ``labels`` and terms ``terms``, keeping only the
    ``keys`` some term reads."""
    kept = tuple(sorted((k, v) for k, v in labels.items() if k in keys))
    if terms is None:
        return PodClass(namespace, kept, (), deleting)
    return PodClass(namespace, kept, terms.anti_affinity, deleting, terms.affinity, terms.preferred)


class ClassIndex:
    """Ids for pod classes, with what the filters look up by class (by label, by anti-affinity
    term, the classes whose terms score others), kept from snapshot to snapshot of one cache:
    a cycle indexes only the classes it has not seen before."""

    def __init__(self) -> None:
        self.classes: list[PodClass] = []
        self._ids: dict[PodClass, int] = {}
        self.by_label: dict[tuple[str, str], list[int]] = {}
        self.with_anti: list[int] = []
        self.scoring: list[int] = []  # required affinity or preferred terms (they score others)
        self.by_anti: dict[AffinityTerm, list[int]] = {}

    def id_of(self, c: PodClass) -> int:
        """The class's id, indexed the first time it is seen."""
        i = self._ids.get(c)
        if i is None:
            i = self._ids[c] = len(self.classes)
            self.classes.append(c)
            for kv in c.labels:
                self.by_label.setdefault(kv, []).append(i)
            if c.anti_affinity:
                self.with_anti.append(i)
                for t in c.anti_affinity:
                    self.by_anti.setdefault(t, []).append(i)
            if c.affinity or c.preferred:
                self.scoring.append(i)
        return i


class BoundPods:
    """The bound pods of a cycle as arrays: their classes, and per pod its class and node, so a
    filter counts the pods of the classes a term matches with array work (a cluster holds tens
    of thousands of pods in a few thousand classes). Class ids come from ``index`` (shared by
    the snapshots of one cache) and cover classes with no pod now; the lookups below name only
    the classes present."""

    def __init__(self, grouped: Sequence[tuple[PodClass, I64]], index: ClassIndex | None = None) -> None:
        index = ClassIndex() if index is None else index
        which: list[int] = []
        sizes: list[int] = []
        nodes: list[I64] = []
        self._nodes_by_class: dict[int, I64] = {}
        for c, n in grouped:
            if not len(n):
                continue
            i = index.id_of(c)
            which.append(i)
            sizes.append(len(n))
            nodes.append(n)
            got = self._nodes_by_class.get(i)
            self._nodes_by_class[i] = n if got is None else np.concatenate([got, n])
        self.index = index
        # The ids known now (the index grows with later snapshots: this one reads its own).
        self.classes: list[PodClass] = list(index.classes)
        self._parts = (which, sizes, nodes)
        self._flat: tuple[I64, I64] | None = None
        self.present = np.zeros(len(index.classes), dtype=bool)
        self.present[which] = True
        self.present_ids: list[int] = sorted(set(which))
        self.with_anti = [i for i in index.with_anti if self.present[i]]
        self.scoring = [i for i in index.scoring if self.present[i]]  # both as long as present

    def _flatten(self) -> tuple[I64, I64]:
        if self._flat is None:
            which, sizes, nodes = self._parts
            self._flat = (
                np.repeat(np.asarray(which, dtype=np.int64), sizes),
                np.concatenate(nodes) if nodes else np.zeros(0, dtype=np.int64),
            )
        return self._flat

    @property
    def class_of(self) -> I64:
        """Per bound pod, its class id (made when first asked: most terms match few classes,
        whose own arrays serve them)."""
        return self._flatten()[0]

    @property
    def node_of(self) -> I64:
        """Per bound pod, its node index (in :attr:`class_of` order)."""
        return self._flatten()[1]

    def with_anti_term(self, term: AffinityTerm) -> Sequence[int]:
        """The classes present whose anti-affinity holds ``term``, a class once per time it
        holds it."""
        n = len(self.present)
        return [i for i in self.index.by_anti.get(term, ()) if i < n and self.present[i]]

    def candidates(self, sel: Selector) -> Sequence[int]:
        """The classes present that may match ``sel``: those with a label an ``In`` requirement
        asks for (most selectors name their app or job), else every class."""
        ins = [r for r in sel.requirements if r[1] == "In"]
        if sel.nothing:
            return ()
        if not ins:
            return self.present_ids
        by_label, present, n = self.index.by_label, self.present, len(self.present)
        best: list[int] | None = None
        for key, _, values in ins:
            got = sorted({i for v in values for i in by_label.get((key, v), ()) if i < n and present[i]})
            if best is None or len(got) < len(best):
                best = got
        return best or ()

    def flags(self, sel: Selector, test: Callable[[PodClass], bool]) -> list[bool]:
        """One flag per class id: ``test`` holds (asked only of :meth:`candidates` of ``sel``)."""
        out = [False] * len(self.classes)
        for i in self.candidates(sel):
            out[i] = test(self.classes[i])
        return out

    def nodes_of(self, matched: Sequence[bool]) -> I64:
        """The node of every pod whose class is marked in ``matched`` (one flag per class)."""
        if not any(matched):
            return np.zeros(0, dtype=np.int64)
        ids = [i for i, m in enumerate(matched) if m]
        if len(ids) <= 64:
            # A term matches few classes (its app, its job): their own arrays, not a mask over
            # every bound pod.
            parts = [a for i in ids if (a := self._nodes_by_class.get(i)) is not None]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        flags = np.asarray(matched, dtype=bool)
        nodes: I64 = self.node_of[flags[self.class_of]]
        return nodes


class ChangeLog:
    """What a non-local filter's placements changed, for one incoming pod class: entries
    ``(event, topology key, domain)``, where a key of None means every node. The session reads
    the entries after the last event it saw, and recounts the nodes of those domains only."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, str | None, int]] = []

    def add(self, event: int, key: str | None, domain: int = -1) -> None:
        """Record a change of the verdict in ``domain`` of ``key`` (None: everywhere)."""
        self.entries.append((event, key, domain))

    def nodes_since(self, topo: TopologyIndex, since: int) -> I64 | None:
        """Nodes whose verdict may have changed after event ``since``; None for every node."""
        by_key: dict[str, set[int]] = {}
        for event, key, d in reversed(self.entries):
            if event <= since:
                break
            if key is None:
                return None
            by_key.setdefault(key, set()).add(d)
        parts = [topo.members(k, sorted(ds)) for k, ds in by_key.items()]
        if sum(len(x) for x in parts) * 2 > len(topo.nodes):
            return None  # most of the cluster: a recount of every node is cheaper than the union
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


class TopologyIndex:
    """The topology domain of every node per topology key: ``domains(key)`` is an int array
    (one entry per node, -1 where the node lacks the label) and the number of domains."""

    def __init__(self, nodes: Sequence[NodeStatic]) -> None:
        self.nodes = nodes
        self._by_key: dict[str, tuple[I64, int]] = {}
        self._members: dict[str, tuple[I64, I64]] = {}

    def per_node(self, key: str) -> bool:
        """Whether every node with the key is a domain of its own (``kubernetes.io/hostname``)."""
        dom, n_dom = self.domains(key)
        return n_dom == int(np.count_nonzero(dom >= 0))

    def members(self, key: str, domains: Sequence[int]) -> I64:
        """The nodes in ``domains`` of ``key``."""
        got = self._members.get(key)
        if got is None:
            dom, n_dom = self.domains(key)
            order = np.argsort(dom, kind="stable")
            starts = np.searchsorted(dom[order], np.arange(n_dom + 1))
            got = self._members[key] = (order.astype(np.int64), starts.astype(np.int64))
        order, starts = got
        parts = [order[starts[d] : starts[d + 1]] for d in domains]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def domains(self, key: str) -> tuple[I64, int]:
        """(domain id per node, -1 without the label; number of domains)."""
        got = self._by_key.get(key)
        if got is None:
            ids: dict[str, int] = {}
            dom = np.fromiter(
                (
                    ids.setdefault(v, len(ids)) if (v := n.labels.get(key)) is not None else -1
                    for n in self.nodes
                ),
                dtype=np.int64,
                count=len(self.nodes),
            )
            got = self._by_key[key] = (dom, len(ids))
        return got
