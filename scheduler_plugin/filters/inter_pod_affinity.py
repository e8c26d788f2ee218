"""kube-scheduler's InterPodAffinity filter: required ``podAffinity`` and ``podAntiAffinity`` of
the incoming pod, and the required anti-affinity of the pods already on the nodes against it.

As kube-scheduler's PreFilter does, the state counts, per topology domain, the pods matching
each term; a node passes when (in kube-scheduler's order)

1. every affinity term has a matching pod in the node's domain of its topology key, the
   node carries every such key, and a pod must match all the terms to count; the first pod
   of a group that is affine to itself passes anywhere the keys exist when no pod in the
   cluster matches yet ("didn't match pod affinity rules");
2. no domain of the node holds a pod matching an anti-affinity term of the incoming pod
   ("didn't match pod anti-affinity rules");
3. no pod in the node's domains has an anti-affinity term matching the incoming pod
   ("didn't satisfy existing pods anti-affinity rules").

Scoring (kube-scheduler's Score and NormalizeScore): the incoming pod's preferred terms add
their weight (affinity) or take it off (anti-affinity) once per matching pod in a node's domain
of the term's key, and so do the terms of the pods already there that match the incoming pod
(their preferred terms, and their required affinity with ``hardPodAffinityWeight``, 1); the
scores of the nodes being scored are stretched to 0-100.

Gang-aware: every pod placed in the cycle is counted as it is placed (Reserve), so the pods of
one gang see each other as if bound one after another. The filter is not local (a pod placed
in a zone changes the verdict on the zone's every node), so the counts of the shapes it
applies to are recounted after each placement rather than kept incrementally."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .plugin import I64, MAX_NODE_SCORE, CompiledPod, CycleInput
from .pod_terms import AffinityTerm, BoundPods, ChangeLog, PodClass, TopologyIndex, pod_class

REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
HOSTNAME_KEY = "kubernetes.io/hostname"
HARD_POD_AFFINITY_WEIGHT = 1  # kube-scheduler's InterPodAffinityArgs default


@dataclass
class _Counts:
    """PreFilter's counts for one incoming pod class: per term, matching pods per domain of the
    term's topology key; per topology key, pods whose anti-affinity matches the incoming pod."""

    me: PodClass  # the incoming pod's class
    aff_terms: tuple[AffinityTerm, ...]
    anti_terms: tuple[AffinityTerm, ...]
    affinity: list[I64]  # one array per required affinity term
    anti: list[I64]  # one array per required anti-affinity term
    existing_anti: dict[str, I64]  # topology key -> per-domain count
    self_match: bool  # the pod matches all its own affinity terms
    log: ChangeLog = field(default_factory=ChangeLog)  # verdict changes since made


@dataclass
class _Preferred:
    """Score counts for one incoming pod class: per preferred term (signed weight), the
    matching pods per domain of the term's key; per topology key, the weights the terms of the
    pods there that match the incoming pod add up to per domain."""

    me: PodClass
    terms: tuple[tuple[int, AffinityTerm], ...]
    counts: list[I64]
    existing: dict[str, I64] = field(default_factory=dict)


@dataclass
class AffinityState:
    """The cycle's pods by class (bound, then placed), and the counts of each incoming pod
    class asked about so far (kept current by Reserve/Unreserve)."""

    topo: TopologyIndex
    ns_labels: Mapping[str, Mapping[str, str]]
    keys: frozenset[str]
    bound: BoundPods  # the bound pods, counted with array work
    # class -> node index -> pods: placed in the cycle (few), less victims taken out
    placed: dict[PodClass, dict[int, int]] = field(default_factory=dict)
    # Anti-affinity terms some pod of the cycle carries (bound or pending): whether a pod
    # without terms of its own is concerned at all.
    anti_terms: set[AffinityTerm] = field(default_factory=set)
    # (incoming class, its affinity terms) -> counts (the class holds the anti-affinity terms)
    counts: dict[tuple[PodClass, tuple[AffinityTerm, ...]], _Counts] = field(default_factory=dict)
    preferred: dict[PodClass, _Preferred] = field(default_factory=dict)
    scoring: bool = False  # some bound or placed pod has terms that score incoming pods
    events: int = 0  # Reserve and Unreserve calls so far
    _applies: dict[PodClass, bool] = field(default_factory=dict)
    _applies_of: dict[int, bool] = field(default_factory=dict)
    # anti_terms by a label ``key=value`` their selector requires, and those requiring none
    # (a class can match only the terms of its labels, and the latter): made when first asked.
    _anti_index: tuple[dict[tuple[str, str], list[AffinityTerm]], list[AffinityTerm]] | None = None

    def anti_terms_for(self, c: PodClass) -> list[AffinityTerm]:
        """The anti-affinity terms that may match pods of class ``c`` (a superset)."""
        if self._anti_index is None:
            by_label: dict[tuple[str, str], list[AffinityTerm]] = {}
            generic: list[AffinityTerm] = []
            for t in self.anti_terms:
                ins = [r for r in t.selector.requirements if r[1] == "In"]
                if not ins:
                    generic.append(t)
                    continue
                key, _, values = ins[0]
                for v in values:
                    by_label.setdefault((key, v), []).append(t)
            self._anti_index = (by_label, generic)
        by_label, generic = self._anti_index
        out = list(generic)
        for kv in c.labels:
            out += by_label.get(kv, ())
        return out

    def placed_arrays(self) -> Iterator[tuple[PodClass, I64, I64]]:
        """Per class placed in the cycle (less victims taken out): its nodes and pods on each."""
        for other, per in self.placed.items():
            if per:
                yield (
                    other,
                    np.fromiter(per.keys(), dtype=np.int64, count=len(per)),
                    np.fromiter(per.values(), dtype=np.int64, count=len(per)),
                )

    def ns(self, namespace: str) -> Mapping[str, str]:
        """A namespace's labels (none when the namespace is unknown)."""
        return self.ns_labels.get(namespace) or {}

    def matched_by(self, term: AffinityTerm) -> list[bool]:
        """Per bound class, whether ``term`` matches its pods."""
        return self.bound.flags(
            term.selector, lambda c: term.matches(c.namespace, c.label_map, self.ns(c.namespace))
        )

    def add_bound(self, arr: I64, key: str, matched: Sequence[bool]) -> None:
        """Add the bound pods of the ``matched`` classes to ``arr``, per domain of ``key`` (pods
        on a node without the key count nowhere)."""
        nodes = self.bound.nodes_of(matched)
        if len(nodes):
            d = self.topo.domains(key)[0][nodes]
            arr += np.bincount(d[d >= 0], minlength=len(arr))[: len(arr)]


def _class_of(state: AffinityState, pod: CompiledPod) -> PodClass:
    return pod_class(pod.namespace, pod.labels, state.keys, pod.terms)


class InterPodAffinity:
    """Required inter-pod affinity and anti-affinity, both ways."""

    name = "InterPodAffinity"
    local = False
    # The verdict for a gang's first pod bounds the rest (its own pods only add repulsion, and
    # a group affine to itself may start anywhere): victim planning asks it with victims gone.
    first_pod_bounds = True

    def cycle_state(self, snapshot: CycleInput) -> AffinityState | None:
        """The bound pods by class; None when no pod of the cluster has a required term."""
        pending = snapshot.pending
        classes = snapshot.pod_classes
        if not any(
            p.terms.affinity
            or p.terms.anti_affinity
            or p.terms.preferred_affinity
            or p.terms.preferred_anti_affinity
            for p in pending
        ) and not any(c.anti_affinity or c.affinity or c.preferred for c, _ in classes):
            return None
        # The label keys some term reads: a class keeps only those, so pods that differ in
        # nothing a term reads are counted together. The cache knows them for every pod; the
        # pending pods' are added for a snapshot made without it.
        pending_terms = {p.terms for p in pending}  # shapes share their terms: each once
        keys: set[str] = set(snapshot.term_keys)
        for terms in pending_terms:
            keys |= terms.label_keys()
        if not snapshot.term_keys:
            for c, _ in classes:
                keys.update(k for k, _ in c.labels)
                for t in (*c.anti_affinity, *c.affinity, *(t for _, t in c.preferred)):
                    keys |= t.keys()
        # Pods being deleted count for affinity as any other (only PodTopologySpread skips them).
        st = AffinityState(
            snapshot.topology,
            snapshot.namespace_labels,
            frozenset(keys),
            snapshot.bound_pods(),
        )
        for j in st.bound.with_anti:
            st.anti_terms.update(st.bound.classes[j].anti_affinity)
        st.scoring = bool(st.bound.scoring)
        for terms in pending_terms:
            st.anti_terms.update(terms.anti_affinity)
        return st

    def applies(self, state: AffinityState, pod: CompiledPod) -> bool:
        """Pods with required terms, and pods some anti-affinity term of the cycle matches."""
        if pod.terms.affinity or pod.terms.anti_affinity:
            return True
        # Asked for every shape, placement after placement: memoised per compiled pod (they
        # live as long as the cycle), then per class.
        got = state._applies_of.get(id(pod))
        if got is None:
            c = _class_of(state, pod)
            got = state._applies.get(c)
            if got is None:
                nsl = state.ns(c.namespace)
                got = state._applies[c] = any(
                    t.matches(c.namespace, c.label_map, nsl) for t in state.anti_terms_for(c)
                )
            state._applies_of[id(pod)] = got
        return got

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """One when an anti-affinity term of the pod matches the pod itself (two would repel
        each other); else no bound of the filter's own."""
        for t in pod.terms.anti_affinity:
            # The namespace selector cannot be judged without the namespaces: only the listed
            # namespaces count here (an upper bound is all this is used for).
            if pod.namespace in t.namespaces and t.selector.matches(pod.labels):
                return 1
        return None

    # ------------------------------------------------------------------ PreFilter
    def _counts(self, state: AffinityState, pod: CompiledPod) -> _Counts:
        c = _class_of(state, pod)
        terms = pod.terms
        key = (c, terms.affinity)
        got = state.counts.get(key)
        if got is not None:
            return got
        aff = [np.zeros(state.topo.domains(t.topology_key)[1], dtype=np.int64) for t in terms.affinity]
        anti = [np.zeros(state.topo.domains(t.topology_key)[1], dtype=np.int64) for t in terms.anti_affinity]
        got = _Counts(
            c, terms.affinity, terms.anti_affinity, aff, anti, {}, self._matches_all(state, terms.affinity, c)
        )
        state.counts[key] = got
        self._count_bound(state, got)
        for other, nodes, ks in state.placed_arrays():
            self._count(state, got, other, nodes, ks)
        return got

    def _count_bound(self, state: AffinityState, counts: _Counts) -> None:
        """The bound pods in the counts of an incoming class: which classes each term matches
        is asked per class, the pods of those classes are counted with array work."""
        me, aff, anti = counts.me, counts.aff_terms, counts.anti_terms
        bound, topo = state.bound, state.topo
        classes = bound.classes
        if aff:
            all_aff = bound.flags(aff[0].selector, lambda c: self._matches_all(state, aff, c))
            for i, t in enumerate(aff):
                state.add_bound(counts.affinity[i], t.topology_key, all_aff)
        for i, t in enumerate(anti):
            state.add_bound(counts.anti[i], t.topology_key, state.matched_by(t))
        nsl_me = state.ns(me.namespace)
        # Per topology key, how many anti-affinity terms of each class match the incoming pod
        # (kube counts a pod once per matching term; Unreserve of a victim takes as many off).
        by_key: dict[str, list[int]] = {}
        for t in state.anti_terms_for(me):  # every bound class's anti-affinity term is among them
            held = bound.with_anti_term(t)
            if held and t.matches(me.namespace, me.label_map, nsl_me):
                per_class = by_key.setdefault(t.topology_key, [0] * len(classes))
                for j in held:
                    per_class[j] += 1
        for key, per_class in by_key.items():
            n_dom = topo.domains(key)[1]
            arr = counts.existing_anti.setdefault(key, np.zeros(n_dom, dtype=np.int64))
            for k in range(1, max(per_class) + 1):
                state.add_bound(arr, key, [x >= k for x in per_class])

    @staticmethod
    def _matches_all(state: AffinityState, terms: Sequence[AffinityTerm], c: PodClass) -> bool:
        nsl = state.ns(c.namespace)
        return all(t.matches(c.namespace, c.label_map, nsl) for t in terms)

    def _count(
        self,
        state: AffinityState,
        counts: _Counts,
        other: PodClass,
        nodes: I64,
        ks: I64,
        event: int | None = None,
    ) -> None:
        """Add ``ks[i]`` pods of class ``other`` on ``nodes[i]`` to the counts of incoming class
        ``counts.me`` (pods on a node without the term's topology key count nowhere). With
        ``event`` (a placement), the domains whose verdict flips are logged."""
        me, aff, anti = counts.me, counts.aff_terms, counts.anti_terms
        nsl_other = state.ns(other.namespace)
        topo = state.topo
        first = event is not None and not any(arr.any() for arr in counts.affinity)

        def add(arr: I64, key: str) -> None:
            d = topo.domains(key)[0][nodes]
            keep = d >= 0
            d = d[keep]
            before = arr[d] > 0
            np.add.at(arr, d, ks[keep])
            if event is not None:
                for x in d[before != (arr[d] > 0)].tolist():
                    counts.log.add(event, key, x)

        if aff and self._matches_all(state, aff, other):
            for i, t in enumerate(aff):
                add(counts.affinity[i], t.topology_key)
        for i, t in enumerate(anti):
            if t.matches(other.namespace, other.label_map, nsl_other):
                add(counts.anti[i], t.topology_key)
        if other.anti_affinity:
            nsl_me = state.ns(me.namespace)
            for t in other.anti_affinity:
                if t.matches(me.namespace, me.label_map, nsl_me):
                    arr = counts.existing_anti.get(t.topology_key)
                    if arr is None:
                        n_dom = topo.domains(t.topology_key)[1]
                        arr = counts.existing_anti[t.topology_key] = np.zeros(n_dom, dtype=np.int64)
                    add(arr, t.topology_key)
        if event is not None and aff and first != (not any(arr.any() for arr in counts.affinity)):
            counts.log.add(event, None)  # the first pod of a self-affine group: every node

    # ------------------------------------------------------------------ Filter
    def _verdicts(self, state: AffinityState, pod: CompiledPod, nodes: I64) -> list[I64]:
        """Per check, in the filter's order, a bool array over ``nodes``: True where it passes."""
        counts = self._counts(state, pod)
        idx = np.asarray(nodes, dtype=np.int64)
        topo = state.topo
        ok_existing = np.ones(len(idx), dtype=bool)
        for key, arr in counts.existing_anti.items():
            if not len(arr):
                continue  # a key no node carries: no domain, nothing refused
            d = topo.domains(key)[0][idx]
            ok_existing &= ~((d >= 0) & (arr[np.maximum(d, 0)] > 0))
        terms = pod.terms
        ok_aff = np.ones(len(idx), dtype=bool)
        if terms.affinity:
            has_keys = np.ones(len(idx), dtype=bool)
            exist = np.ones(len(idx), dtype=bool)
            for t, arr in zip(terms.affinity, counts.affinity, strict=True):
                d = topo.domains(t.topology_key)[0][idx]
                has_keys &= d >= 0
                exist &= (
                    (d >= 0) & (arr[np.maximum(d, 0)] > 0) if len(arr) else np.zeros(len(idx), dtype=bool)
                )
            # The first pod of a group affine to itself: no pod anywhere matches yet.
            first = counts.self_match and not any(arr.any() for arr in counts.affinity)
            ok_aff = has_keys & (exist | first)
        ok_anti = np.ones(len(idx), dtype=bool)
        for t, arr in zip(terms.anti_affinity, counts.anti, strict=True):
            d = topo.domains(t.topology_key)[0][idx]
            if len(arr):
                ok_anti &= ~((d >= 0) & (arr[np.maximum(d, 0)] > 0))
        return [ok_aff, ok_anti, ok_existing]

    def cap_counts(self, state: AffinityState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """No pod where a check fails; at most one where the pod's anti-affinity matches itself
        (the second would repel the first)."""
        ok = np.logical_and.reduce(self._verdicts(state, pod, nodes))
        counts[~ok] = 0
        most = self.most_per_node(pod)
        if most is not None:
            np.minimum(counts, most, out=counts)

    def reasons(self, state: AffinityState, pod: CompiledPod, nodes: I64) -> list[tuple[str, ...]]:
        """The first failing check's words, per node."""
        aff, anti, ex = self._verdicts(state, pod, nodes)
        out: list[tuple[str, ...]] = []
        for a, b, c in zip(aff.tolist(), anti.tolist(), ex.tolist(), strict=True):
            out.append(
                (REASON_AFFINITY,)
                if not a
                else (REASON_ANTI_AFFINITY,)
                if not b
                else (REASON_EXISTING_ANTI_AFFINITY,)
                if not c
                else ()
            )
        return out

    def pre_filter(self, state: AffinityState, pod: CompiledPod) -> None:
        """Refuses no pod outright."""
        return None

    def cohorts(self, state: AffinityState, pod: CompiledPod) -> list[I64] | None:
        """While no pod matches the required affinity of a pod affine to itself, the first such
        pod may go to any node with the terms' keys, and it decides the domain of the rest: the
        node groups sharing every term's domain."""
        terms = pod.terms.affinity
        if not terms:
            return None
        counts = self._counts(state, pod)
        if not counts.self_match or any(arr.any() for arr in counts.affinity):
            return None
        doms = [state.topo.domains(t.topology_key)[0] for t in terms]
        has = np.logical_and.reduce([d >= 0 for d in doms])
        nodes = np.flatnonzero(has)
        if not len(nodes):
            return []
        keys = np.stack([d[nodes] for d in doms], axis=1)
        _, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        return [nodes[inv == g] for g in range(int(inv.max()) + 1)]

    # ------------------------------------------------------------------ Score
    def _preferred(self, state: AffinityState, pod: CompiledPod) -> _Preferred:
        c = _class_of(state, pod)
        got = state.preferred.get(c)
        if got is not None:
            return got
        terms = c.preferred
        got = state.preferred[c] = _Preferred(
            c, terms, [np.zeros(state.topo.domains(t.topology_key)[1], dtype=np.int64) for _, t in terms]
        )
        bound, topo = state.bound, state.topo
        for (_, t), arr in zip(terms, got.counts, strict=True):
            state.add_bound(arr, t.topology_key, state.matched_by(t))
        # The bound pods' own terms that match the incoming pod, weighed per pod.
        weights: dict[str, list[int]] = {}
        for j in bound.scoring:
            for w, t in self._toward(state, bound.classes[j], c):
                weights.setdefault(t.topology_key, [0] * len(bound.classes))[j] += w
        for key, per_class in weights.items():
            arr = got.existing.setdefault(key, np.zeros(topo.domains(key)[1], dtype=np.int64))
            w_pod = np.asarray(per_class, dtype=np.int64)[bound.class_of]
            keep = w_pod != 0
            d = topo.domains(key)[0][bound.node_of[keep]]
            ok = d >= 0
            arr += np.bincount(d[ok], weights=w_pod[keep][ok], minlength=len(arr))[: len(arr)].astype(
                np.int64
            )
        for other, nodes, ks in state.placed_arrays():
            self._count_preferred(state, got, other, nodes, ks)
        return got

    @staticmethod
    def _toward(state: AffinityState, other: PodClass, me: PodClass) -> list[tuple[int, AffinityTerm]]:
        """The terms of pods of class ``other`` that score a pod of class ``me``, with their
        weights: required affinity (kube's ``hardPodAffinityWeight``, 1) and preferred terms."""
        if not other.affinity and not other.preferred:
            return []
        nsl = state.ns(me.namespace)
        weighted = [*((HARD_POD_AFFINITY_WEIGHT, t) for t in other.affinity), *other.preferred]
        return [(w, t) for w, t in weighted if t.matches(me.namespace, me.label_map, nsl)]

    def _count_preferred(
        self, state: AffinityState, got: _Preferred, other: PodClass, nodes: I64, ks: I64
    ) -> None:
        nsl = state.ns(other.namespace)
        topo = state.topo
        for (_, t), arr in zip(got.terms, got.counts, strict=True):
            if t.matches(other.namespace, other.label_map, nsl):
                d = topo.domains(t.topology_key)[0][nodes]
                keep = d >= 0
                np.add.at(arr, d[keep], ks[keep])
        for w, t in self._toward(state, other, got.me):
            key = t.topology_key
            if key not in got.existing:
                got.existing[key] = np.zeros(topo.domains(key)[1], dtype=np.int64)
            d = topo.domains(key)[0][nodes]
            keep = d >= 0
            np.add.at(got.existing[key], d[keep], w * ks[keep])

    def score(self, state: AffinityState, pod: CompiledPod, nodes: I64) -> npt.NDArray[np.float64] | None:
        """kube-scheduler's Score and NormalizeScore over ``nodes`` (the nodes being scored): the
        pod's preferred terms against the pods there, and those pods' required affinity and
        preferred terms against the pod, counting the pods placed so far; None when neither
        side has a term."""
        if not pod.terms.preferred and not state.scoring:
            return None
        got = self._preferred(state, pod)
        idx = np.asarray(nodes, dtype=np.int64)
        raw = np.zeros(len(idx), dtype=np.int64)
        topo = state.topo
        for (w, t), arr in zip(got.terms, got.counts, strict=True):
            d = topo.domains(t.topology_key)[0][idx]
            if len(arr):
                raw += np.where(d >= 0, w * arr[np.maximum(d, 0)], 0)
        for key, arr in got.existing.items():
            d = topo.domains(key)[0][idx]
            if len(arr):
                raw += np.where(d >= 0, arr[np.maximum(d, 0)], 0)
        out = np.zeros(len(idx))
        if len(idx):
            low, high = int(raw.min()), int(raw.max())
            if high > low:
                out = np.floor(MAX_NODE_SCORE * ((raw - low) / (high - low)))  # kube's order
        return out

    def soft_keys(self, state: AffinityState, pod: CompiledPod) -> list[str]:
        """The keys of the preferred anti-affinity terms the pod matches itself: each placement
        lowers the next one's scores in its domain. (A preferred affinity to itself only raises
        them where the gang already is, which packing the gang does anyway.)"""
        if not pod.terms.preferred_anti_affinity:
            return []  # asked of every shape placed: most have no such term
        c = _class_of(state, pod)
        nsl = state.ns(c.namespace)
        return [
            t.topology_key
            for _, t in pod.terms.preferred_anti_affinity
            if t.matches(c.namespace, c.label_map, nsl)
        ]

    # ------------------------------------------------------------------ Reserve
    def _move(self, state: AffinityState, pod: CompiledPod, nodes: I64, k: int) -> None:
        if not len(nodes):
            return
        c = _class_of(state, pod)
        per = state.placed.setdefault(c, {})
        for node in nodes.tolist():
            per[node] = per.get(node, 0) + k
            if not per[node]:
                del per[node]
        if k > 0 and (c.affinity or c.preferred):
            state.scoring = True  # the counts of every incoming class take it in below
        if c.anti_affinity and k > 0 and not state.anti_terms.issuperset(c.anti_affinity):
            state.anti_terms.update(c.anti_affinity)
            state._anti_index = None
            state._applies.clear()
            state._applies_of.clear()
        ks = np.full(len(nodes), k, dtype=np.int64)
        state.events += 1
        for counts in state.counts.values():
            self._count(state, counts, c, nodes, ks, state.events)
        for got in state.preferred.values():
            self._count_preferred(state, got, c, nodes, ks)

    def batch_keys(self, state: AffinityState, pod: CompiledPod) -> list[str] | None:
        """An anti-affinity term the pod matches itself makes each placement repel the next in
        its domain: one per domain of its key. Affinity counts only grow with placements (they
        let more nodes in), except for the first pod of a group affine to itself, which decides
        where the rest go: alone."""
        counts = self._counts(state, pod)
        if pod.terms.affinity and not any(arr.any() for arr in counts.affinity):
            return None
        me = counts.me
        nsl = state.ns(me.namespace)
        return [t.topology_key for t in pod.terms.anti_affinity if t.matches(me.namespace, me.label_map, nsl)]

    def batch_quota(
        self, state: AffinityState, pod: CompiledPod, key: str, cand: I64, dom: I64, left: int
    ) -> None:
        """One per domain of the key."""
        return None

    def mark(self, state: AffinityState) -> int:
        """The last Reserve or Unreserve so far."""
        return state.events

    def changed(self, state: AffinityState, pod: CompiledPod, since: int) -> I64 | None:
        """The nodes whose verdict for ``pod`` may have changed after ``since`` (None: all)."""
        return self._counts(state, pod).log.nodes_since(state.topo, since)

    def reserve(self, state: AffinityState, pod: CompiledPod, nodes: I64) -> None:
        """The placed pods count from now on, for every incoming class."""
        self._move(state, pod, nodes, 1)

    def unreserve(self, state: AffinityState, pod: CompiledPod, nodes: I64) -> None:
        """The placements are undone (or victims leave): the pods no longer count."""
        self._move(state, pod, nodes, -1)


FILTER = InterPodAffinity()
