"""One case on both schedulers: create its objects, ask kube-scheduler (the oracle) and ours about
each pod, compare, clean up; and the tally of a run.

Outcomes per pod:

* ``agree``: the same feasible nodes. When both find none, the reasons are compared too
  (report-only): kube-scheduler's ``0/N nodes are available`` counts against our filters' reasons
  asked in kube-scheduler's order (``OurVerdict.kube_order``), and against the text our scheduler
  reports (its own order: NodeReady first, room before host ports), with our wording of a taint
  mapped to kube-scheduler's (:data:`SAME_MEANING`).
* ``disagree``: the sets differ (the goal is none).
* ``refused``: our scheduler refuses the pod outright (a constraint none of our filters judges
  yet, ``scheduler_plugin/filters/unsupported.py``): reported, never placed. Counted apart.
* ``by-design``: kube-scheduler also finds nodes that are not Ready feasible (the pod tolerates
  their not-ready taint), which our NodeReady filter refuses as Volcano's cache drops them
  (``scheduler_plugin/filters/node_ready.py``). Counted apart, never hidden.
* ``kube-pod-error``: kube-scheduler's DynamicResources filter met an error on some node (its
  allocator's: all devices asked of a pool being updated or invalid) and aborted the pod's
  scheduling attempt: no node. Ours refuses the nodes where the error arises, with the same
  words, and judges the others (:func:`pod_error`). Counted apart, never hidden.
* ``kube-forgot-port``: kube-scheduler finds a node feasible whose host port a running pod holds,
  because a pod on that node that held the same port finished: its cache keeps one entry per
  port, not a count, and removing the finished pod removed the entry for both (``HostPortInfo``;
  a kubelet refuses the second pod of such a pair, which is how a real node gets there). Ours
  recomputes the ports of the pods left. kube-scheduler's own state, counted apart.
"""

from __future__ import annotations

import asyncio
import copy
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler_plugin.filters.node_ports import REASON_HOST_PORTS, host_ports_conflict, pod_host_ports
from scheduler_plugin.filters.node_ready import REASON_NOT_READY
from scheduler_plugin.filters.plugin import HostPort

from .cases import Case
from .kube_scheduler import KubeSchedulerOracle, OracleChoice, OracleError, OracleVerdict, pod_scheduled_false
from .ours import OurScores, OurVerdict, our_scores, our_verdict
from .rest import Rest

SYNC_TIMEOUT = 30.0
# Our words for a reason kube-scheduler words otherwise, as kube-scheduler v1.37 (and v1.34) words it.
SAME_MEANING: tuple[tuple[re.Pattern[str], str], ...] = (
    # v1.32 dropped the taint from the text; ours still names it.
    (re.compile(r"^node\(s\) had untolerated taint \{.*\}$"), "node(s) had untolerated taint(s)"),
)


@dataclass
class PodResult:
    """Both verdicts on one pod of a case, and what they make together."""

    case: Case
    outcome: str
    kube: OracleVerdict
    ours: OurVerdict
    # When both found no node: "same" or "differ", the reason counts of our filters asked in
    # kube-scheduler's order and of our scheduler's text against kube-scheduler's; else None.
    reasons: str | None = None
    text_reasons: str | None = None
    kube_reasons: dict[str, int] = field(default_factory=dict)
    our_reasons: dict[str, int] = field(default_factory=dict)
    our_text_reasons: dict[str, int] = field(default_factory=dict)
    # kube-scheduler's whole text for the pod (also when the extender was called), for reports.
    kube_text: str | None = None
    # Scores (see the module docstring): the outcome, our scores of the feasible nodes, the
    # scorer's choice, the scores kube-scheduler logged for it and whether they equal ours.
    score: str | None = None
    our_scores: OurScores | None = None
    kube_choice: OracleChoice | None = None
    kube_scores: dict[str, dict[str, int]] = field(default_factory=dict)
    score_maps: str | None = None

    @property
    def pod_key(self) -> str:
        """``namespace/name`` of the pod asked about (its generated name)."""
        meta = self.kube.pod["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    def describe(self, with_case: bool = True) -> str:
        """The two verdicts, the nodes on which they differ and why ours refused them, and (with
        ``with_case``) every object of the case."""
        kube_only = sorted(self.kube.nodes - self.ours.nodes)
        ours_only = sorted(self.ours.nodes - self.kube.nodes)
        lines = [
            f"pod {self.pod_key} (case seed={self.case.seed} index={self.case.index}): {self.outcome}",
            f"  kube-scheduler: {sorted(self.kube.nodes)}",
            f"  ours:           {sorted(self.ours.nodes)}",
        ]
        if self.ours.refused:
            lines.append(f"  ours refused it: {self.ours.refused}")
        for n in kube_only:
            lines.append(f"  only kube-scheduler finds {n} feasible; ours: {self.ours.reasons.get(n)}")
        for n in ours_only:
            lines.append(f"  only ours finds {n} feasible")
        if self.kube_text:
            lines.append(f"  kube-scheduler says: {self.kube_text}")
        if self.ours.message:
            lines.append(f"  ours says:           {self.ours.message}")
        if self.reasons == "differ":
            lines.append(
                f"  reason counts: kube-scheduler {self.kube_reasons}, ours in its order {self.our_reasons}"
            )
        if self.score is not None and self.our_scores is not None and self.kube_choice is not None:
            chose = self.kube_choice.node or f"nothing ({self.kube_choice.message})"
            lines.append(f"  scores: {self.score}; kube-scheduler chose {chose}")
            if self.kube_choice.nodes != self.kube.nodes:
                lines.append(f"  kube-scheduler's scorer filtered to: {sorted(self.kube_choice.nodes)}")
            lines.append(f"  our best:  {sorted(self.our_scores.best)}")
            lines.append(f"  our total: {self.our_scores.total}")
            for plugin, by_node in sorted(self.our_scores.by_plugin.items()):
                lines.append(f"  ours {plugin}: {dict(sorted(by_node.items()))}")
            for plugin, logged in sorted(self.kube_scores.items()):
                lines.append(f"  kube-scheduler {plugin}: {dict(sorted(logged.items()))}")
        text = "\n".join(lines)
        return text + ("\n" + self.case.yaml() if with_case else "")


def reason_counts(message: str | None) -> dict[str, int] | None:
    """``{reason: nodes}`` of a ``0/N nodes are available: ...`` text (ours or kube-scheduler's),
    our words mapped to kube-scheduler's (:data:`SAME_MEANING`); None when there is no such text
    or ours was cut short ("N more kinds")."""
    if not message:
        return None
    m = re.match(r"\d+/\d+ nodes are available(?:: (.*))?", message)
    if m is None:
        return None
    body = (m.group(1) or "").split(". ")[0].rstrip(".")
    out: Counter[str] = Counter()
    for item in re.split(r", (?=\d+ )", body) if body else []:
        count, _, reasons = item.partition(" ")
        if not count.isdigit():
            # A PreFilter's refusal is said once, with no count of nodes.
            out[kube_words(item)] += 1
            continue
        if reasons.endswith("more kinds"):
            return None
        # Ours joins a node's reasons ("Insufficient cpu, Insufficient memory"); kube-scheduler
        # counts each on its own.
        for reason in reasons.split(", "):
            out[kube_words(reason)] += int(count)
    return dict(out)


def kube_words(reason: str) -> str:
    """One of our reasons in kube-scheduler's words (:data:`SAME_MEANING`)."""
    for pattern, theirs in SAME_MEANING:
        if pattern.match(reason):
            return theirs
    return reason


def per_node_counts(reasons: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """``{reason: nodes}`` of per-node reasons, in kube-scheduler's words."""
    return dict(Counter(kube_words(r) for rs in reasons.values() for r in rs))


def not_ready(nodes: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The nodes whose Ready condition is not True."""
    return frozenset(
        str(n["metadata"]["name"])
        for n in nodes
        for c in (n.get("status") or {}).get("conditions") or []
        if c.get("type") == "Ready" and c.get("status") != "True"
    )


def forgotten_port(node: str, pod: Mapping[str, Any], bound: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``pod``'s host ports conflict on ``node`` only with ports that a running pod and a
    finished pod there both held (the ports kube-scheduler's cache lost with the finished pod)."""
    live: set[HostPort] = set()
    done: set[HostPort] = set()
    for b in bound:
        if b["spec"].get("nodeName") == node:
            finished = (b.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            (done if finished else live).update(pod_host_ports(b))
    want = pod_host_ports(pod)
    return host_ports_conflict(want, live) and not host_ports_conflict(want, live - done)


def compare(
    case: Case,
    nodes: Sequence[Mapping[str, Any]],
    kube: OracleVerdict,
    ours: OurVerdict,
    bound: Sequence[Mapping[str, Any]] = (),
) -> PodResult:
    """The outcome of one pod (see the module docstring)."""
    if ours.refused is not None:
        return PodResult(case, "refused", kube, ours, kube_text=kube.message)
    if kube.nodes == ours.nodes:
        result = PodResult(case, "agree", kube, ours, kube_text=kube.message)
        theirs = reason_counts(kube.message)
        if not kube.nodes and theirs is not None:
            result.kube_reasons = theirs
            result.our_reasons = per_node_counts(ours.kube_order)
            result.reasons = "same" if theirs == result.our_reasons else "differ"
            text = reason_counts(ours.message)
            if text is not None:
                result.our_text_reasons = text
                result.text_reasons = "same" if theirs == text else "differ"
        return result
    if pod_error(kube, ours):
        return PodResult(case, "kube-pod-error", kube, ours, kube_text=kube.message)
    kube_only, ours_only = kube.nodes - ours.nodes, ours.nodes - kube.nodes
    down = not_ready(nodes)

    def explained(n: str) -> str | None:
        if n in down and ours.reasons.get(n) == (REASON_NOT_READY,):
            return "by-design"
        if ours.reasons.get(n) == (REASON_HOST_PORTS,) and forgotten_port(n, kube.pod, bound):
            return "kube-forgot-port"
        return None

    kinds = {explained(n) for n in kube_only}
    if not ours_only and None not in kinds:
        outcome = "kube-forgot-port" if "kube-forgot-port" in kinds else "by-design"
        return PodResult(case, outcome, kube, ours, kube_text=kube.message)
    return PodResult(case, "disagree", kube, ours, kube_text=kube.message)


def pod_error(kube: OracleVerdict, ours: OurVerdict) -> bool:
    """Whether kube-scheduler failed the pod's scheduling attempt with an error that ours gives
    as the reason of the nodes where it arises: the DynamicResources filter's allocator error
    (a request for all devices of a pool being updated or invalid; a CEL selector's runtime
    error). Go aborts the attempt on the first node that errs, so it finds no node; ours refuses
    that node with the error and judges the others (``dra_allocator``'s module docstring)."""
    if kube.nodes or kube.message is None or re.match(r"\d+/\d+ nodes are available", kube.message):
        return False
    # kube-scheduler's text: 'running "DynamicResources" filter plugin: <the allocator's error>'.
    return any(r and r in kube.message for rs in ours.dra.values() for r in rs)


def score_outcome(ours: OurScores, choice: OracleChoice, feasible: frozenset[str]) -> str:
    """How kube-scheduler's choice stands to our scores (see the module docstring)."""
    if choice.node is None:
        return "no choice"
    if choice.nodes != feasible:
        return "scored other nodes"
    return "same best" if choice.node in ours.best else "score disagree"


def same_score_maps(ours: OurScores, logged: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether kube-scheduler's logged scores are ours, plugin by plugin and node by node (a
    plugin that skipped the pod logs nothing: it gave every node 0)."""
    for plugin in {*ours.by_plugin, *logged}:
        mine = {n: int(v) for n, v in ours.by_plugin.get(plugin, {}).items()}
        theirs = logged.get(plugin, {})
        if any(mine.get(n, 0) != theirs.get(n, 0) for n in ours.nodes):
            return False
    return True


def barrier_pod(case: Case) -> dict[str, Any]:
    """A pod every node takes while it has a free pod slot: it tolerates every taint and asks for
    nothing else; in a case with DRA objects, it also claims the device of :func:`sync_objects`
    that every node reaches."""
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.example/sync:1"}],
        "tolerations": [{"operator": "Exists"}],
    }
    if case.dra:
        spec["resourceClaims"] = [{"name": "sync", "resourceClaimName": f"{case.tag}-sync"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{case.tag}-sync", "namespace": case.namespaces[0]["metadata"]["name"]},
        "spec": spec,
    }


SYNC_DRIVER = "sync.oracle.example"


def sync_rule(case: Case) -> dict[str, Any]:
    """A DeviceTaintRule that keeps the sync device of :func:`sync_objects` from allocation: made
    before the case's DRA objects and deleted after them, so once the barrier pod fits,
    kube-scheduler's slice tracker has seen every DeviceTaintRule of the case too."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"{case.tag}-sync"},
        "spec": {
            "deviceSelector": {"driver": SYNC_DRIVER},
            "taint": {"key": "oracle.example/sync", "effect": "NoSchedule"},
        },
    }


def sync_objects(case: Case) -> list[dict[str, Any]]:
    """A DeviceClass, a ResourceSlice of one device every node reaches and a claim of it, all of
    a driver of their own (no class of the case selects it), created after the case's DRA
    objects: kube-scheduler's informers deliver each kind in order, so once the barrier pod
    claiming that device fits, kube-scheduler sees every class, slice and claim (with its
    allocation) of the case. Our side is not given them (they change no verdict)."""
    tag = case.tag
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": f"{tag}-sync"},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{SYNC_DRIVER}'"}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{tag}-sync"},
            "spec": {
                "driver": SYNC_DRIVER,
                "pool": {"name": f"{tag}-sync", "generation": 1, "resourceSliceCount": 1},
                "allNodes": True,
                "devices": [{"name": "sync-0"}],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"{tag}-sync", "namespace": case.namespaces[0]["metadata"]["name"]},
            "spec": {
                "devices": {
                    "requests": [{"name": "sync", "exactly": {"deviceClassName": f"{tag}-sync", "count": 1}}]
                }
            },
        },
    ]


def with_free_slot(nodes: Sequence[Mapping[str, Any]], bound: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The nodes with a free pod slot (allocatable pods above the pods bound there that have
    not finished)."""
    on: Counter[str] = Counter(
        str(p["spec"]["nodeName"])
        for p in bound
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )
    return frozenset(
        str(n["metadata"]["name"])
        for n in nodes
        if int((n.get("status") or {}).get("allocatable", {}).get("pods", "0"))
        > on[str(n["metadata"]["name"])]
    )


class Differential:
    """Runs cases, one after the other, on one apiserver and one oracle."""

    def __init__(self, api: Rest, oracle: KubeSchedulerOracle) -> None:
        self.api = api
        self.oracle = oracle

    async def run(self, case: Case) -> list[PodResult]:
        """Every pod of the case on both schedulers; the case's objects are deleted afterwards."""
        try:
            nodes, bound, dra = await self._create(case)
            await self._sync(case, nodes, bound)
            verdicts = await self.oracle.feasible_nodes_many(case.pods)
            others = [*case.namespaces, *case.cluster, *case.claims, *dra]
            results = [
                compare(case, nodes, v, our_verdict(nodes, bound, v.pod, others), bound) for v in verdicts
            ]
            for r in results:
                if r.outcome == "disagree" and r.kube_text is None:
                    live = await self.api.get(r.kube.pod)
                    r.kube_text = pod_scheduled_false(live or {})
            # Scores, one pod at a time (a pod kube-scheduler chose a node for is assumed there
            # until its bind fails), after every filter query of the case.
            for r, pod in zip(results, case.pods, strict=True):
                if r.outcome != "agree" or len(r.ours.nodes) < 2:
                    continue
                r.our_scores = our_scores(nodes, bound, r.kube.pod, r.ours.nodes, others)
                if r.our_scores.uniform:
                    r.score = "uniform"
                    continue
                r.kube_choice = await self.oracle.chosen_node(pod)
                r.score = score_outcome(r.our_scores, r.kube_choice, r.kube.nodes)
                meta = r.kube_choice.pod["metadata"]
                r.kube_scores = self.oracle.logged_scores(f"{meta['namespace']}/{meta['name']}")
                if r.kube_scores or not any(r.our_scores.total.values()):
                    r.score_maps = "same" if same_score_maps(r.our_scores, r.kube_scores) else "differ"
            return results
        finally:
            await self._delete(case)

    async def _create(
        self, case: Case
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """Create the case's objects; the nodes, the bound pods and the DRA objects as stored."""
        api = self.api
        await asyncio.gather(*(api.create(ns) for ns in case.namespaces))
        for obj in case.cluster:  # StorageClasses before the PVs that name them
            await self._create_with_status(obj)
        if case.dra:
            # Held until the case's DeviceTaintRules are created (see sync_objects).
            await api.create(sync_rule(case))
        dra = list(
            await asyncio.gather(
                *(api.create({k: v for k, v in o.items() if k != "status"}) for o in case.dra)
            )
        )
        nodes = list(await asyncio.gather(*(api.create(n) for n in case.nodes)))
        await asyncio.gather(*(self._create_with_status(c) for c in case.claims))
        bound = list(
            await asyncio.gather(
                *(self._bound_pod(p, case.then.get(p["metadata"]["name"])) for p in case.bound)
            )
        )
        # The allocations (and the bound pods they are reserved for), as kube-scheduler wrote
        # them when it scheduled those pods.
        uids = {str(p["metadata"]["name"]): str(p["metadata"]["uid"]) for p in bound}
        for i, obj in enumerate(case.dra):
            if "status" in obj:
                status = copy.deepcopy(obj["status"])
                for ref in status.get("reservedFor") or []:
                    ref["uid"] = uids[ref["name"]]
                dra[i] = await api.replace_status({**dra[i], "status": status})
        if case.dra:
            # Created last: once kube-scheduler sees these, it sees every DRA object before them.
            await api.delete(sync_rule(case))
            for obj in sync_objects(case):
                await api.create(obj)
        return nodes, bound, dra

    async def _bound_pod(self, pod: Mapping[str, Any], then: str | None) -> dict[str, Any]:
        """Create a bound pod, then finish it or start deleting it (``Case.then``)."""
        stored = await self.api.create(pod)
        if then in ("Succeeded", "Failed"):
            stored = await self.api.replace_status(
                {**stored, "status": {**stored.get("status", {}), "phase": then}}
            )
        elif then == "Terminating":
            await self.api.delete(stored, grace_seconds=300)
            stored = await self.api.get(stored) or stored
        return stored

    async def _create_with_status(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create, then write the status a controller would have (PVs, PVCs)."""
        body = {k: v for k, v in obj.items() if k != "status"}
        stored = await self.api.create(body)
        if "status" in obj and obj["kind"] in ("PersistentVolume", "PersistentVolumeClaim"):
            stored = await self.api.replace_status({**stored, "status": obj["status"]})
        return stored

    async def _sync(
        self, case: Case, nodes: Sequence[Mapping[str, Any]], bound: Sequence[Mapping[str, Any]]
    ) -> None:
        """Wait until kube-scheduler's cache holds this case's nodes and no other, with the pod
        slots the bound pods leave: a pod that tolerates everything and asks for nothing must
        find exactly the nodes with a free slot. Its informers deliver pods in the order they
        were created, so the pods asked about afterwards find the bound pods counted too."""
        want = with_free_slot(nodes, bound)
        deadline = time.monotonic() + SYNC_TIMEOUT
        while True:
            v = await self.oracle.feasible_nodes(barrier_pod(case))
            total = re.match(r"\d+/(\d+) nodes", v.message or "")
            if v.nodes == want and (v.message is None or (total and int(total.group(1)) == len(nodes))):
                return
            if time.monotonic() > deadline:
                raise OracleError(
                    f"kube-scheduler's cache did not come to hold case {case.tag} within {SYNC_TIMEOUT:.0f}s: "
                    f"a pod that tolerates everything fits {sorted(v.nodes)} ({v.message}), "
                    f"the nodes with a free pod slot are {sorted(want)}\n{self.oracle.log_tail()}"
                )
            await asyncio.sleep(0.05)

    async def _delete(self, case: Case) -> None:
        api = self.api
        namespaces = [str(ns["metadata"]["name"]) for ns in case.namespaces]
        await asyncio.gather(*(api.delete_all("Pod", ns) for ns in namespaces))
        await asyncio.gather(*(api.delete(n) for n in case.nodes))
        for ns in namespaces:
            await api.delete_all("ResourceClaim", ns)
        for obj in [*case.dra, *(sync_objects(case) if case.dra else [])]:
            if obj["kind"] != "ResourceClaim":
                await api.delete(obj)
        # PVs and PVCs carry protection finalizers no controller removes here.
        for obj in [*case.claims, *case.cluster]:
            if await api.merge_patch(obj, {"metadata": {"finalizers": None}}) is not None:
                await api.delete(obj)


@dataclass
class Tally:
    """The figures of a run."""

    cases: int = 0
    pods: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    text_reasons: Counter[str] = field(default_factory=Counter)
    # How many of the case's nodes kube-scheduler found feasible: none, some, all.
    coverage: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    disagreements: list[PodResult] = field(default_factory=list)
    reason_diffs: list[PodResult] = field(default_factory=list)
    # Score outcomes (PodResult.score, "uniform": not asked) and logged score maps.
    scores: Counter[str] = field(default_factory=Counter)
    score_maps: Counter[str] = field(default_factory=Counter)
    score_disagreements: list[PodResult] = field(default_factory=list)
    score_map_diffs: list[PodResult] = field(default_factory=list)
    # Reasons of our text that kube-scheduler's lacks, and the other way round (the order of
    # the filters, or wording).
    only_kube: Counter[str] = field(default_factory=Counter)
    only_ours: Counter[str] = field(default_factory=Counter)
    # Pods with ResourceClaims (see add).
    dra: Counter[str] = field(default_factory=Counter)

    def add(self, results: Sequence[PodResult]) -> None:
        """Count one case's results."""
        self.cases += 1
        for r in results:
            self.pods += 1
            self.outcomes[r.outcome] += 1
            n = len(r.case.nodes)
            self.coverage["none" if not r.kube.nodes else "all" if len(r.kube.nodes) == n else "some"] += 1
            if (r.kube.pod.get("spec") or {}).get("resourceClaims"):
                # Pods with ResourceClaims: kube-scheduler found a node for some, and our
                # DynamicResources filter refused some node of the case while it did.
                self.dra["pods"] += 1
                self.dra["placed"] += bool(r.kube.nodes)
                self.dra["placed, some node refused by DRA"] += bool(r.kube.nodes and r.ours.dra)
            if r.outcome == "disagree":
                self.disagreements.append(r)
            if r.outcome == "refused" and r.ours.refused:
                self.refusals[r.ours.refused] += 1
            if r.reasons:
                self.reasons[r.reasons] += 1
                if r.reasons == "differ":
                    self.reason_diffs.append(r)
            if r.score:
                self.scores[r.score] += 1
                if r.score in ("score disagree", "scored other nodes", "no choice"):
                    self.score_disagreements.append(r)
            if r.score_maps:
                self.score_maps[r.score_maps] += 1
                if r.score_maps == "differ":
                    self.score_map_diffs.append(r)
            if r.text_reasons:
                self.text_reasons[r.text_reasons] += 1
                if r.text_reasons == "differ":
                    self.only_kube.update(set(r.kube_reasons) - set(r.our_text_reasons))
                    self.only_ours.update(set(r.our_text_reasons) - set(r.kube_reasons))

    @property
    def scores_compared(self) -> int:
        """Pods whose scores kube-scheduler was asked about."""
        return sum(n for k, n in self.scores.items() if k != "uniform")

    def summary(self) -> str:
        """One paragraph of figures."""
        o = self.outcomes
        text = (
            f"{self.cases} cases, {self.pods} pods: {o['agree']} agree, {o['disagree']} disagree, "
            f"{o['refused']} refused by ours, {o['by-design']} differ by design (NodeReady), "
            f"{o['kube-forgot-port']} where kube-scheduler's cache forgot a host port, "
            f"{o['kube-pod-error']} that kube-scheduler failed with an error (DRA)"
        )
        c = self.coverage
        text += f"\nkube-scheduler found no node for {c['none']} pods, some nodes for {c['some']}, every node for {c['all']}"
        if self.dra["pods"]:
            d = self.dra
            text += (
                f"\npods with ResourceClaims: {d['pods']}, kube-scheduler found a node for {d['placed']}, "
                f"{d['placed, some node refused by DRA']} of them with some node our DynamicResources refused"
            )
        both = self.reasons["same"] + self.reasons["differ"]
        text += (
            f"\nreason counts where neither finds a node ({both} pods): our filters in kube-scheduler's order "
            f"the same for {self.reasons['same']}, different for {self.reasons['differ']}; our scheduler's text "
            f"the same for {self.text_reasons['same']}, different for {self.text_reasons['differ']}"
        )
        sc = self.scores
        text += (
            f"\nscores (same feasible nodes, 2 or more): {self.scores_compared} pods compared, "
            f"{sc['same best']} same best, {sc['score disagree']} score disagree, "
            f"{sc['scored other nodes']} scored other nodes, {sc['no choice']} no choice; {sc['uniform']} with all our scores equal, not asked; "
            f"kube-scheduler's logged scores the same as ours for {self.score_maps['same']}, "
            f"different for {self.score_maps['differ']}"
        )
        if self.refusals:
            text += "\nrefusals: " + ", ".join(f"{n} {why}" for why, n in self.refusals.most_common())
        if self.only_kube or self.only_ours:
            text += "\nreasons only kube-scheduler's text gave: " + ", ".join(
                f"{why} ({n})" for why, n in self.only_kube.most_common()
            )
            text += "\nreasons only our scheduler's text gave: " + ", ".join(
                f"{why} ({n})" for why, n in self.only_ours.most_common()
            )
        return text
