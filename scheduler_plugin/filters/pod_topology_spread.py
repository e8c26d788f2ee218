"""kube-scheduler's PodTopologySpread plugin: the ``DoNotSchedule`` topology spread constraints
of the incoming pod filter, the ``ScheduleAnyway`` ones score.

For each constraint, kube-scheduler's PreFilter counts the pods of the incoming pod's
namespace matching the constraint's selector (pods being deleted excluded) per domain of the
topology key, over the nodes that carry every constraint's key and pass the constraint's node
inclusion policies (``nodeAffinityPolicy: Honor``: the pod's node selector and required node
affinity; ``nodeTaintsPolicy: Honor``: its tolerations of NoSchedule/NoExecute taints). A
node passes when it carries the key and

    matching pods in its domain + (1 if the pod matches its own selector) - global minimum
        <= maxSkew

where the global minimum is the fewest matching pods of any counted domain, or 0 while fewer
domains than ``minDomains`` exist. An empty selector counts no pod but matches the pod itself,
as in kube-scheduler. Every pod placed in the cycle is counted as it is placed (Reserve), so a
gang's pods spread as if bound one after another.

Scoring counts the same way for the ``ScheduleAnyway`` constraints: a node scores, per
constraint whose key it carries, the matching pods of its domain times ``log(domains + 2)``
(the domains among the scored nodes; for the hostname, the scored nodes) plus ``maxSkew - 1``;
NormalizeScore turns the fewest into the most points, and a node without every key gets none."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .node_affinity import matches_node_affinity
from .nodes import NodeStatic
from .plugin import I64, MAX_NODE_SCORE, CompiledPod, CycleInput
from .pod_terms import BoundPods, ChangeLog, PodClass, SpreadConstraint, TopologyIndex
from .taint_toleration import first_untolerated

REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
MAX_INT32 = (1 << 31) - 1
HOSTNAME_KEY = "kubernetes.io/hostname"
F64 = npt.NDArray[np.float64]


@dataclass
class _Counts:
    """PreFilter's state for one incoming pod shape: per hard constraint, the nodes counted,
    matching pods per domain and which domains exist."""

    constraints: tuple[SpreadConstraint, ...]
    namespace: str
    eligible: list[npt.NDArray[np.bool_]]  # per constraint, per node
    counts: list[I64]  # per constraint, per domain
    present: list[npt.NDArray[np.bool_]]  # per constraint, per domain: some counted node has it
    self_match: list[bool]
    soft: bool = False  # the ScheduleAnyway constraints (scoring: no verdict to log)
    log: ChangeLog = field(default_factory=ChangeLog)  # verdict changes since made

    def domain_verdicts(self, i: int) -> npt.NDArray[np.bool_]:
        """Per domain of constraint ``i``: whether one more pod keeps the skew."""
        c = self.constraints[i]
        present = self.present[i]
        n_dom = int(present.sum())
        low = int(self.counts[i][present].min()) if n_dom else MAX_INT32
        if n_dom < c.min_domains:
            low = 0
        out: npt.NDArray[np.bool_] = self.counts[i] + int(self.self_match[i]) - low <= c.max_skew
        return out


@dataclass
class SpreadState:
    """The bound pods by class and the counts of each incoming pod asked about so far."""

    nodes: Sequence[NodeStatic]
    topo: TopologyIndex
    bound: BoundPods
    counts: dict[object, _Counts] = field(default_factory=dict)
    _inclusion: dict[object, npt.NDArray[np.bool_]] = field(default_factory=dict)

    def inclusion(self, key: object, test: Callable[[NodeStatic], bool]) -> npt.NDArray[np.bool_]:
        """A node inclusion policy's verdict per node, made once per distinct input."""
        got = self._inclusion.get(key)
        if got is None:
            got = self._inclusion[key] = np.fromiter(
                (test(nd) for nd in self.nodes), dtype=bool, count=len(self.nodes)
            )
        return got

    events: int = 0  # Reserve and Unreserve calls so far


def _key(pod: CompiledPod, cons: tuple[SpreadConstraint, ...]) -> object:
    # Everything the counts depend on: the constraints, the namespace, the node inclusion
    # inputs (selector, affinity, tolerations) and the labels the selectors read.
    keys: set[str] = set()
    for c in cons:
        keys |= c.selector.keys()
    labels = tuple(sorted((k, v) for k, v in pod.labels.items() if k in keys))
    terms = pod.required_terms
    return (
        cons,
        pod.namespace,
        labels,
        pod.node_selector,
        None if terms is None else repr(terms),
        pod.tolerations,
    )


def _own_class(pod: CompiledPod) -> PodClass:
    """The pod itself as the class :func:`_counted` asks about (all its labels)."""
    return PodClass(pod.namespace, tuple(sorted(pod.labels.items())))


def _counted(c: PodClass, con: SpreadConstraint, namespace: str) -> bool:
    """kube's ``countPodsMatchSelector``: same namespace, not being deleted, selector matches (an
    empty selector counts nothing)."""
    return (
        not c.deleting
        and c.namespace == namespace
        and not con.selector.empty
        and con.selector.matches(c.label_map)
    )


class PodTopologySpread:
    """DoNotSchedule topology spread constraints."""

    name = "PodTopologySpread"
    local = False

    def cycle_state(self, snapshot: CycleInput) -> SpreadState | None:
        """The bound pods by class; None when no pod of the cycle has a constraint."""
        if not any(p.terms.spread for p in snapshot.pending):
            return None
        nodes = snapshot.node_static
        return SpreadState(nodes, snapshot.topology, snapshot.bound_pods())

    def applies(self, state: SpreadState, pod: CompiledPod) -> bool:
        """Pods with a DoNotSchedule constraint."""
        return bool(pod.terms.hard_spread)

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """No bound of its own: how many one node takes depends on the other domains."""
        return None

    def _counts(self, state: SpreadState, pod: CompiledPod, soft: bool = False) -> _Counts:
        cons = pod.terms.soft_spread if soft else pod.terms.hard_spread
        key = _key(pod, cons)
        got = state.counts.get(key)
        if got is not None:
            return got
        n = len(state.nodes)
        doms = [state.topo.domains(c.topology_key) for c in cons]
        has_all = np.ones(n, dtype=bool)
        for dom, _ in doms:
            has_all &= dom >= 0
        eligible: list[npt.NDArray[np.bool_]] = []
        for c in cons:
            e = has_all.copy()
            if c.honor_node_affinity and (pod.node_selector or pod.required_terms is not None):
                e &= state.inclusion(
                    ("affinity", pod.node_selector, repr(pod.required_terms)),
                    lambda nd: matches_node_affinity(pod, nd),
                )
            if c.honor_taints:
                e &= state.inclusion(
                    ("taints", pod.tolerations),
                    lambda nd: first_untolerated(nd.taints, pod.tolerations) is None,
                )
            eligible.append(e)
        counts = [np.zeros(nd, dtype=np.int64) for _, nd in doms]
        present = []
        for (dom, nd), e in zip(doms, eligible, strict=True):
            p = np.zeros(nd, dtype=bool)
            p[dom[e]] = True
            present.append(p)
        got = _Counts(
            cons,
            pod.namespace,
            eligible,
            counts,
            present,
            [c.selector.matches(pod.labels) for c in cons],
            soft,
        )
        state.counts[key] = got
        bound = state.bound
        for i, c in enumerate(cons):

            def counted(other: PodClass, c: SpreadConstraint = c) -> bool:
                return _counted(other, c, pod.namespace)

            nodes = bound.nodes_of(bound.flags(c.selector, counted))
            nodes = nodes[eligible[i][nodes]]
            d = state.topo.domains(c.topology_key)[0][nodes]
            counts[i] += np.bincount(d, minlength=len(counts[i]))[: len(counts[i])]
        return got

    def _add(
        self,
        state: SpreadState,
        counts: _Counts,
        namespace: str,
        other: PodClass,
        nodes: I64,
        ks: I64,
        event: int | None = None,
    ) -> None:
        """Count ``ks[i]`` pods of class ``other`` on ``nodes[i]``; with ``event`` (a placement),
        log the domains whose verdict flips (the one counted, and every domain the new global
        minimum lets in or keeps out)."""
        for i, c in enumerate(counts.constraints):
            if not _counted(other, c, namespace):
                continue
            keep = counts.eligible[i][nodes]
            if not keep.any():
                continue
            d = state.topo.domains(c.topology_key)[0][nodes[keep]]
            before = counts.domain_verdicts(i) if event is not None and not counts.soft else None
            np.add.at(counts.counts[i], d, ks[keep])
            if before is not None and event is not None:
                for x in np.flatnonzero(before != counts.domain_verdicts(i)).tolist():
                    counts.log.add(event, c.topology_key, x)

    def _verdicts(self, state: SpreadState, pod: CompiledPod, nodes: I64) -> tuple[I64, I64]:
        """(has every key, skew within bounds) over ``nodes``."""
        got = self._counts(state, pod)
        idx = np.asarray(nodes, dtype=np.int64)
        has = np.ones(len(idx), dtype=bool)
        fits = np.ones(len(idx), dtype=bool)
        for i, c in enumerate(got.constraints):
            d = state.topo.domains(c.topology_key)[0][idx]
            has &= d >= 0
            verdicts = got.domain_verdicts(i)
            if len(verdicts):
                fits &= (d < 0) | verdicts[np.maximum(d, 0)]
        return has, fits

    def cap_counts(self, state: SpreadState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """No pod where the skew would exceed maxSkew or a key is missing; one at most where it
        fits (the next would change the skew: the session recounts after each placement)."""
        has, fits = self._verdicts(state, pod, nodes)
        ok = has & fits
        counts[~ok] = 0
        np.minimum(counts, 1, out=counts)

    def reasons(self, state: SpreadState, pod: CompiledPod, nodes: I64) -> list[tuple[str, ...]]:
        """kube-scheduler's words, per node."""
        has, fits = self._verdicts(state, pod, nodes)
        return [
            (REASON_SPREAD_LABEL,) if not h else (REASON_SPREAD,) if not f else ()
            for h, f in zip(has.tolist(), fits.tolist(), strict=True)
        ]

    def pre_filter(self, state: SpreadState, pod: CompiledPod) -> None:
        """Refuses no pod outright."""
        return None

    def cohorts(self, state: SpreadState, pod: CompiledPod) -> None:
        """Spreading bounds no group of nodes."""
        return None

    def _move(self, state: SpreadState, pod: CompiledPod, nodes: I64, k: int) -> None:
        if not len(nodes):
            return
        c = _own_class(pod)
        ks = np.full(len(nodes), k, dtype=np.int64)
        state.events += 1
        for counts in state.counts.values():
            self._add(state, counts, counts.namespace, c, nodes, ks, state.events)

    def batch_keys(self, state: SpreadState, pod: CompiledPod) -> list[str]:
        """A constraint that counts the pod itself: one per domain of its key (a placement only
        raises its own domain's count, and the global minimum only rises, which lets more in)."""
        got = self._counts(state, pod)
        own = _own_class(pod)
        return [c.topology_key for c in got.constraints if _counted(own, c, pod.namespace)]

    def batch_quota(
        self, state: SpreadState, pod: CompiledPod, key: str, cand: I64, dom: I64, left: int
    ) -> list[int] | None:
        """Water-filling: the next pod goes to the least filled domain that still has a
        candidate, which keeps every step within maxSkew (the global minimum only rises), until
        no domain may take one more. One constraint on ``key`` counting the pod, every
        candidate counted by it; else None."""
        got = self._counts(state, pod)
        own = _own_class(pod)
        which = [
            i
            for i, c in enumerate(got.constraints)
            if c.topology_key == key and _counted(own, c, pod.namespace)
        ]
        if len(which) != 1:
            return None
        i = which[0]
        c = got.constraints[i]
        if not got.eligible[i][cand].all() or (dom < 0).any():
            return None
        counts = got.counts[i].copy()
        present = got.present[i]
        n_present = int(present.sum())
        queues: dict[int, list[int]] = {}
        for pos, d in enumerate(dom.tolist()):
            queues.setdefault(d, []).append(pos)
        heap = [(int(counts[d]), q[0], d) for d, q in queues.items()]
        heapq.heapify(heap)
        nxt = dict.fromkeys(queues, 0)

        def low() -> int:
            if n_present < c.min_domains:
                return 0
            return int(counts[present].min())

        floor = low()
        out: list[int] = []
        while heap and len(out) < left:
            cnt, pos, d = heapq.heappop(heap)
            if cnt + 1 - floor > c.max_skew:
                break  # the least filled domain with a candidate is full to the skew: all are
            out.append(pos)
            counts[d] += 1
            if present[d] and cnt == floor:
                floor = low()
            nxt[d] += 1
            if nxt[d] < len(queues[d]):
                heapq.heappush(heap, (cnt + 1, queues[d][nxt[d]], d))
        return out

    def score(self, state: SpreadState, pod: CompiledPod, nodes: I64) -> F64 | None:
        """kube-scheduler's Score and NormalizeScore over ``nodes`` (the nodes being scored) for
        the pod's ScheduleAnyway constraints, counting the pods placed so far; None without any."""
        if not pod.terms.soft_spread:
            return None
        got = self._counts(state, pod, soft=True)
        idx = np.asarray(nodes, dtype=np.int64)
        doms = [state.topo.domains(c.topology_key)[0][idx] for c in got.constraints]
        counted = np.logical_and.reduce([d >= 0 for d in doms])  # else ignored: no points
        raw = np.zeros(len(idx))
        for i, (c, d) in enumerate(zip(got.constraints, doms, strict=True)):
            size = int(counted.sum()) if c.topology_key == HOSTNAME_KEY else len(np.unique(d[counted]))
            if not len(got.counts[i]):
                continue  # a key no node carries: every node is left out of the scores
            weight = np.log(size + 2)
            cnt = got.counts[i][np.maximum(d, 0)]
            raw += np.where(d >= 0, cnt * weight + (c.max_skew - 1), 0.0)
        score = np.round(raw).astype(np.int64)  # Score returns whole numbers
        out = np.zeros(len(idx))
        if not counted.any():
            return out
        low, high = int(score[counted].min()), int(score[counted].max())
        if high == 0:
            out[counted] = MAX_NODE_SCORE
        else:
            out[counted] = (MAX_NODE_SCORE * (high + low - score[counted])) // high
        return out

    def soft_keys(self, state: SpreadState, pod: CompiledPod) -> list[str]:
        """The keys of the ScheduleAnyway constraints that count the pod itself: each placement
        changes the next one's scores in its domain."""
        soft = pod.terms.soft_spread
        if not soft:
            return []  # asked of every shape placed: most have no such constraint
        own = _own_class(pod)
        return [c.topology_key for c in soft if _counted(own, c, pod.namespace)]

    def mark(self, state: SpreadState) -> int:
        """The last Reserve or Unreserve so far."""
        return state.events

    def changed(self, state: SpreadState, pod: CompiledPod, since: int) -> I64 | None:
        """The nodes whose verdict for ``pod`` may have changed after ``since`` (None: all)."""
        return self._counts(state, pod).log.nodes_since(state.topo, since)

    def reserve(self, state: SpreadState, pod: CompiledPod, nodes: I64) -> None:
        """The placed pods count in their domains from now on."""
        self._move(state, pod, nodes, 1)

    def unreserve(self, state: SpreadState, pod: CompiledPod, nodes: I64) -> None:
        """The placements are undone (or victims leave)."""
        self._move(state, pod, nodes, -1)


FILTER = PodTopologySpread()
