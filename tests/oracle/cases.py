"""Seeded random cases for the differential test: a small cluster, pods already bound in it, and
the pods to ask both schedulers about.

Always generated (what our filters judge today): nodes with hostname, zone, rack and random extra
labels, varied cpu/memory/pods (sometimes ephemeral storage and extended resources) allocatable,
NoSchedule/PreferNoSchedule/NoExecute taints, cordoned nodes and NotReady nodes (tainted as the
control plane taints them); pods bound with ``spec.nodeName`` (requests, init and sidecar
containers, a RuntimeClass's overhead, host ports, labels); pods asked about with the same and
pod-level resources, nodeSelector, required and preferred node affinity (In, NotIn, Exists,
DoesNotExist, Gt, Lt, matchFields on metadata.name) and tolerations.

Behind the flags of :data:`FEATURES` (on where our filters judge them, see
:data:`DEFAULT_FEATURES`): pod affinity and anti-affinity, required anti-affinity of bound pods,
bound pods' terms that score the incoming pods, nodes missing a topology label, topology spread
constraints, volumes, and Dynamic Resource Allocation (``dra``). A filter that lands adds its flag to
:data:`DEFAULT_FEATURES`; a new kind of case is a new flag here.

Every case is a pure function of ``(seed, index, features)``; names carry both numbers, so the
objects of two cases never collide in one cluster."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
TOPOLOGY_KEYS = (HOSTNAME, ZONE, RACK)
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
GPU = "nvidia.com/gpu"
FPGA = "example.com/fpga"
CSI_DRIVER = "csi.example.com"

# Every flag a case can be generated with, and what it adds.
FEATURES: dict[str, str] = {
    "pod-affinity": "required and preferred podAffinity/podAntiAffinity on the pods asked about "
    "(topologyKey hostname/zone/rack, labelSelector, namespaces, namespaceSelector, "
    "matchLabelKeys/mismatchLabelKeys)",
    "existing-anti-affinity": "required podAntiAffinity on pods already bound (kube-scheduler keeps "
    "an incoming pod they match out of their domain)",
    "existing-preferred": "preferred podAffinity/podAntiAffinity and required podAffinity on pods "
    "already bound (they score the incoming pods they match)",
    "topology-spread": "topologySpreadConstraints (DoNotSchedule/ScheduleAnyway, maxSkew, minDomains, "
    "nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys)",
    "partial-topology": "nodes without the zone or rack label (topology spread skips them, a term "
    "by that key matches nothing there)",
    "volumes": "PVCs bound to PVs with node affinity, WaitForFirstConsumer claims with available PVs, "
    "Immediate unbound claims, ReadWriteOncePod claims in use, missing claims, CSINode volume limits",
    "nodes-without-pod-slots": "nodes whose allocatable names no pods (no pod fits, for both)",
    "dra": "Dynamic Resource Allocation (resource.k8s.io/v1): DeviceClasses, per-node ResourceSlices "
    "(split, incomplete and older pools, slices with a node selector or for all nodes), claims "
    "allocated to bound pods, and pods asked about with ResourceClaims (ExactCount, All, CEL "
    "selectors, firstAvailable, matchAttribute)",
}
# The flags our filters judge: every kind of case.
DEFAULT_FEATURES: frozenset[str] = frozenset(
    {
        "pod-affinity",
        "existing-anti-affinity",
        "existing-preferred",
        "partial-topology",
        "topology-spread",
        "volumes",
        "nodes-without-pod-slots",
        "dra",
    }
)

APPS = ("web", "db", "cache", "batch")
TIERS = ("front", "back")
VERSIONS = ("v1", "v2")
TEAMS = ("a", "b")
TAINT_KEYS = ("dedicated", "example.com/maintenance", GPU, "example.com/spot")
TAINT_VALUES = ("", "a", "b", "true")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CONDITION_TIME = "2026-01-01T00:00:00Z"


@dataclass
class Case:
    """One cluster and the pods to ask about, as objects to create in this order: namespaces,
    ``cluster`` (RuntimeClasses; StorageClasses, PVs, CSINodes), ``dra`` (DeviceClasses,
    ResourceSlices, ResourceClaims), nodes, ``claims`` (PVCs), ``bound`` pods, then each of
    ``pods`` asked about. PVs and PVCs carry the ``status`` a controller would have
    written (the runner writes it after creating them)."""

    seed: int
    index: int
    features: frozenset[str]
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    cluster: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    bound: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    # DRA objects (flag ``dra``): DeviceClasses, ResourceSlices, ResourceClaims, created after
    # ``cluster``; a claim's ``status`` (allocation, and reservedFor naming bound pods by name:
    # the runner puts in their UIDs) is written after the bound pods are created.
    dra: list[dict[str, Any]] = field(default_factory=list)
    # What becomes of a bound pod once created, by name: "Succeeded" or "Failed" (the phase a
    # kubelet would write: it no longer counts), or "Terminating" (deleted with a grace period
    # no kubelet ends: it still counts).
    then: dict[str, str] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        """The prefix of every name of the case."""
        return case_tag(self.seed, self.index, self.features)

    def yaml(self) -> str:
        """Every object of the case, as one YAML stream (for failure messages)."""
        objs = [
            *self.namespaces,
            *self.cluster,
            *self.dra,
            *self.nodes,
            *self.claims,
            *self.bound,
            *self.pods,
        ]
        head = f"# case seed={self.seed} index={self.index} features={sorted(self.features)}\n"
        if self.then:
            head += f"# then: {self.then}\n"
        return head + yaml.safe_dump_all(objs, sort_keys=False)


def case_tag(seed: int, index: int, features: frozenset[str] = frozenset()) -> str:
    """``s<seed>c<index>`` and a short digest of the features: unique per case in one cluster."""
    if not features:
        return f"s{seed}c{index}"
    digest = hashlib.sha256(",".join(sorted(features)).encode()).hexdigest()[:4]
    return f"s{seed}c{index}f{digest}"


def generate(seed: int, index: int, features: frozenset[str] = DEFAULT_FEATURES) -> Case:
    """Case number ``index`` of the run seeded ``seed``."""
    unknown = set(features) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown features {sorted(unknown)}; known: {sorted(FEATURES)}")
    return _Gen(random.Random(f"{seed}:{index}"), Case(seed, index, frozenset(features))).case()


class _Gen:
    """The generator of one case (one random stream, so a case is reproducible)."""

    def __init__(self, rng: random.Random, case: Case) -> None:
        self.rng = rng
        self.c = case
        self.tag = case.tag
        self.on = case.features
        # Flags added later (existing-preferred, partial-topology) draw from a stream of their
        # own, so that turning them on leaves every other draw, and so the cases of the earlier
        # flags, as they were.
        self.scoring_rng = random.Random(f"{case.seed}:{case.index}:existing-preferred")
        self.label_values: dict[str, set[str]] = {}
        self.csi_nodes: set[str] = set()

    def case(self) -> Case:
        r, c = self.rng, self.c
        c.cluster = [
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": f"{self.tag}-{name}"},
                "handler": name,
                "overhead": {"podFixed": overhead},
            }
            for name, overhead in (("kata", {"cpu": "250m", "memory": "160Mi"}), ("gvisor", {"cpu": "1"}))
        ]
        c.namespaces = [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": f"{self.tag}-ns{k}", "labels": {"team": r.choice(TEAMS)}},
            }
            for k in range(r.randint(1, 3))
        ]
        self.nodes()
        if "volumes" in self.on:
            self.volumes()
        self.bound_pods()
        c.pods = [self.pod(f"{self.tag}-p{j}") for j in range(r.randint(3, 8))]
        if "dra" in self.on:
            # Its own stream: the cases without the flag stay as they were.
            _Dra(random.Random(f"{c.seed}:{c.index}:dra"), c).generate()
        return c

    # ------------------------------------------------------------------ nodes
    def nodes(self) -> None:
        r = self.rng
        zones = [f"zone-{z}" for z in "abc"[: r.randint(2, 3)]]
        racks = {z: [f"{z}-r{k}" for k in range(r.randint(1, 2))] for z in zones}
        for i in range(r.randint(3, 12)):
            name = f"{self.tag}-n{i}"
            zone = r.choice(zones)
            labels = {HOSTNAME: name, ZONE: zone, RACK: r.choice(racks[zone])}
            if "partial-topology" in self.on and self.scoring_rng.random() < 0.2:
                del labels[self.scoring_rng.choice((ZONE, RACK))]
            if r.random() < 0.5:
                labels["disktype"] = r.choice(("ssd", "hdd"))
            if r.random() < 0.3:
                labels["example.com/gpu-type"] = r.choice(("a100", "h100"))
            if r.random() < 0.6:
                # Mostly integers (for Gt/Lt); now and then a value Gt/Lt cannot parse.
                labels["example.com/gen"] = self.number()
            if r.random() < 0.5:
                labels["example.com/pool"] = r.choice(("batch", "serving", "system"))
            for k, v in labels.items():
                self.label_values.setdefault(k, set()).add(v)
            self.c.nodes.append(self.node(name, labels))

    def node(self, name: str, labels: dict[str, str]) -> dict[str, Any]:
        r = self.rng
        alloc = {
            "cpu": r.choice(("1", "2", "4", "8", "16", "3500m", "7800m")),
            "memory": r.choice(("2Gi", "4Gi", "8Gi", "16Gi", "31Gi", "7900Mi")),
            "pods": r.choice(("1", "2", "3", "4", "6", "110", "110", "110")),
        }
        if r.random() < 0.6:
            alloc["ephemeral-storage"] = r.choice(("10Gi", "50Gi"))
        if r.random() < 0.3:
            alloc[GPU] = r.choice(("1", "2", "4", "8"))
        if r.random() < 0.1:
            alloc[FPGA] = r.choice(("1", "2"))
        if "nodes-without-pod-slots" in self.on and r.random() < 0.2:
            del alloc["pods"]
        taints: list[dict[str, str]] = []
        if r.random() < 0.2:
            for _ in range(r.randint(1, 2)):
                t = {
                    "key": r.choice(TAINT_KEYS),
                    "value": r.choice(TAINT_VALUES),
                    "effect": r.choice(EFFECTS),
                }
                if all((t["key"], t["effect"]) != (o["key"], o["effect"]) for o in taints):
                    taints.append(t)
        spec: dict[str, Any] = {}
        if r.random() < 0.05:
            spec["unschedulable"] = True
            if r.random() < 0.5:  # the taint follows the cordon a moment later
                taints.append({"key": UNSCHEDULABLE, "effect": "NoSchedule"})
        ready = r.choices(("True", "False", "Unknown"), weights=(94, 3, 3))[0]
        if ready != "True":
            # As the control plane taints a node that is not ready (TaintNodesByCondition and
            # the node lifecycle controller); kube-scheduler relies on these taints alone.
            key = NOT_READY if ready == "False" else UNREACHABLE
            taints += [{"key": key, "effect": "NoSchedule"}, {"key": key, "effect": "NoExecute"}]
        for t in taints:
            if not t.get("value"):
                t.pop("value", None)
        if taints:
            spec["taints"] = taints
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {
                "allocatable": alloc,
                "capacity": alloc,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": ready,
                        "reason": "KubeletReady" if ready == "True" else "NodeStatusUnknown",
                        "message": "fake node of the oracle's differential test",
                        "lastHeartbeatTime": CONDITION_TIME,
                        "lastTransitionTime": CONDITION_TIME,
                    }
                ],
            },
        }

    # ------------------------------------------------------------------ pods
    def resources(self, scale: float = 1.0, light: bool = False) -> dict[str, Any]:
        """A container's resources: best effort, requests, or limits only (the apiserver then
        defaults the requests to them); extended resources always with equal limits. ``light``:
        the smaller half of the sizes (pods already bound, so that most nodes keep some room)."""
        r = self.rng
        if r.random() < 0.15:
            return {}
        req: dict[str, str] = {}
        cpus = ("100m", "250m", "500m", "500m", "1", "1", "1500m", "2", "3", "4", "6", "9")
        mems = ("64Mi", "256Mi", "256Mi", "1Gi", "1Gi", "2Gi", "4Gi", "8Gi", "17Gi")
        if r.random() < 0.85:
            req["cpu"] = r.choice(cpus[:7] if light else cpus)
        if r.random() < 0.7:
            req["memory"] = r.choice(mems[:6] if light else mems)
        if r.random() < 0.08:
            req["ephemeral-storage"] = r.choice(("1Gi", "20Gi", "60Gi"))
        if scale < 1.0:
            req = {k: v for k, v in req.items() if r.random() < scale}
        out: dict[str, Any] = {}
        extended = {}
        if r.random() < 0.08 * scale:
            extended[GPU] = r.choice(("1", "2", "4"))
        if r.random() < 0.03 * scale:
            extended[FPGA] = "1"
        if r.random() < 0.15:
            out["limits"] = {**req, **extended}
        else:
            if req or extended:
                out["requests"] = {**req, **extended}
            if extended:
                out["limits"] = dict(extended)
        return out

    def ports(self, taken: set[tuple[str, str, int]]) -> list[dict[str, Any]]:
        r = self.rng
        out = []
        for _ in range(r.randint(1, 2)):
            proto = r.choices(("TCP", "UDP", "SCTP"), weights=(6, 3, 1))[0]
            # Only "" and 0.0.0.0 bind every address; "::" is one address to kube-scheduler too.
            ip = r.choices(("", "0.0.0.0", "127.0.0.1", "10.0.0.1", "::"), weights=(5, 1, 2, 2, 1))[0]
            port = r.choice((8080, 8081, 9090))
            if (proto, ip or "0.0.0.0", port) in taken:
                continue
            taken.add((proto, ip or "0.0.0.0", port))
            p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": proto}
            if ip:
                p["hostIP"] = ip
            out.append(p)
        return out

    def containers(self, ports_p: float, light: bool = False) -> dict[str, Any]:
        """``containers`` and maybe ``initContainers`` (regular, or sidecars that run all along)."""
        r = self.rng
        taken: set[tuple[str, str, int]] = set()
        spec: dict[str, Any] = {"containers": []}
        for k in range(r.choices((1, 2), weights=(3, 1))[0]):
            c: dict[str, Any] = {
                "name": f"c{k}",
                "image": "registry.example/app:1",
                "resources": self.resources(light=light),
            }
            if r.random() < ports_p:
                c["ports"] = self.ports(taken)
            spec["containers"].append(c)
        if r.random() < 0.2:
            # In order: a regular init container runs beside the sidecars started before it.
            spec["initContainers"] = []
            for k in range(r.choices((1, 2, 3), weights=(4, 2, 1))[0]):
                init: dict[str, Any] = {
                    "name": f"init{k}",
                    "image": "registry.example/init:1",
                    "resources": self.resources(light=light),
                }
                if r.random() < 0.4:
                    init["restartPolicy"] = "Always"  # a sidecar: its requests and ports hold all along
                    init["resources"] = self.resources(scale=0.5, light=light)
                    if r.random() < ports_p:
                        init["ports"] = self.ports(taken)
                spec["initContainers"].append(init)
        if r.random() < 0.05:
            # The apiserver gives every container port of a host-network pod its host port.
            spec["hostNetwork"] = True
            for c in spec["containers"]:
                for port in c.get("ports") or []:
                    port.pop("hostPort")
            spec["containers"][0].setdefault("ports", []).append({"containerPort": 9100})
        if r.random() < 0.08:
            spec["runtimeClassName"] = f"{self.tag}-{r.choice(('kata', 'gvisor'))}"  # adds spec.overhead
        return spec

    def labels(self) -> dict[str, str]:
        r = self.rng
        labels = {"app": r.choice(APPS)}
        if r.random() < 0.6:
            labels["tier"] = r.choice(TIERS)
        if r.random() < 0.6:
            labels["version"] = r.choice(VERSIONS)
        return labels

    def namespace(self) -> str:
        return str(self.rng.choice(self.c.namespaces)["metadata"]["name"])

    def bound_pods(self) -> None:
        r = self.rng
        j = 0
        for node in self.c.nodes:
            for _ in range(r.choices((0, 1, 2, 3), weights=(4, 3, 2, 1))[0]):
                spec = self.containers(ports_p=0.25, light=True)
                spec["nodeName"] = node["metadata"]["name"]
                ns = self.namespace()
                if "existing-anti-affinity" in self.on and r.random() < 0.3:
                    spec["affinity"] = {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [self.pod_term()]
                        }
                    }
                if "existing-preferred" in self.on and self.scoring_rng.random() < 0.4:
                    self.existing_terms(spec)
                if "volumes" in self.on and r.random() < 0.3:
                    self.use_claims(spec, ns, missing=False)
                self.c.bound.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": f"{self.tag}-b{j}", "namespace": ns, "labels": self.labels()},
                        "spec": spec,
                    }
                )
                if r.random() < 0.12:
                    self.c.then[f"{self.tag}-b{j}"] = r.choice(("Succeeded", "Failed", "Terminating"))
                j += 1

    def pod(self, name: str) -> dict[str, Any]:
        r = self.rng
        spec = self.containers(ports_p=0.3)
        ns = self.namespace()
        if r.random() < 0.05:
            self.pod_level_resources(spec)
        if r.random() < 0.2:
            spec["nodeSelector"] = self.node_selector()
        affinity: dict[str, Any] = {}
        if r.random() < 0.3:
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [self.node_term() for _ in range(r.randint(1, 2))]
                }
            }
        if r.random() < 0.2:
            affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": r.randint(1, 100), "preference": self.node_term(fields=False)}
            ]
        if "pod-affinity" in self.on and r.random() < 0.6:
            for kind in ("podAffinity", "podAntiAffinity"):
                if r.random() < 0.5:
                    affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [self.pod_term()]}
                if r.random() < 0.3:
                    affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
                        {"weight": r.randint(1, 100), "podAffinityTerm": self.pod_term()}
                    ]
        if affinity:
            spec["affinity"] = affinity
        if r.random() < 0.5:
            spec["tolerations"] = [self.toleration() for _ in range(r.randint(1, 3))]
        if "topology-spread" in self.on and r.random() < 0.6:
            spec["topologySpreadConstraints"] = self.spread()
        if "volumes" in self.on and r.random() < 0.5:
            self.use_claims(spec, ns, missing=True)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": self.labels()},
            "spec": spec,
        }

    def pod_level_resources(self, spec: dict[str, Any]) -> None:
        """``spec.resources`` (PodLevelResources, beta in 1.34): more than all containers ask
        together, init containers included (the apiserver's bound is below that)."""
        cpu = mem = 0
        for c in [*spec["containers"], *spec.get("initContainers", [])]:
            req = (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits") or {}
            cpu += _milli(req.get("cpu", "0"))
            mem += _mebi(req.get("memory", "0"))
        spec["resources"] = {"requests": {"cpu": f"{cpu + 500}m", "memory": f"{mem + 512}Mi"}}

    # ------------------------------------------------------------------ node affinity and tolerations
    def node_selector(self) -> dict[str, str]:
        r = self.rng
        out = {}
        for _ in range(r.choices((1, 2), weights=(3, 1))[0]):
            key = r.choice(sorted(self.label_values))
            out[key] = r.choice(sorted(self.label_values[key])) if r.random() < 0.9 else "nowhere"
        return out

    def node_term(self, fields: bool = True) -> dict[str, Any]:
        r = self.rng
        term: dict[str, Any] = {}
        if not fields or r.random() < 0.85:
            term["matchExpressions"] = [
                self.node_expression() for _ in range(r.choices((1, 2), weights=(3, 1))[0])
            ]
        if fields and (not term or r.random() < 0.15):
            names = [n["metadata"]["name"] for n in self.c.nodes]
            name = r.choice(names) if r.random() < 0.85 else f"{self.tag}-gone"
            term["matchFields"] = [
                {"key": "metadata.name", "operator": r.choice(("In", "NotIn")), "values": [name]}
            ]
        return term

    def node_expression(self) -> dict[str, Any]:
        r = self.rng
        op = r.choices(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"), weights=(4, 2, 2, 1, 1, 1))[0]
        if op in ("Gt", "Lt"):
            return {"key": "example.com/gen", "operator": op, "values": [self.number(low=0, high=6)]}
        key = r.choice([*sorted(self.label_values), "example.com/absent"])
        if op in ("Exists", "DoesNotExist"):
            return {"key": key, "operator": op}
        pool = [*sorted(self.label_values.get(key, set())), "other"]
        return {"key": key, "operator": op, "values": r.sample(pool, min(len(pool), r.randint(1, 3)))}

    def number(self, low: int = 1, high: int = 5) -> str:
        """Mostly a small integer (Gt/Lt compare them); now and then a valid label value Go's
        strconv.ParseInt reads differently from Python's int, or not at all."""
        r = self.rng
        if r.random() < 0.9:
            return str(r.randint(low, high))
        return r.choice(("v2", "007", "3_0", "1_0", "99999999999999999999", "0x4"))

    def toleration(self) -> dict[str, Any]:
        r = self.rng
        taints = [t for n in self.c.nodes for t in (n["spec"].get("taints") or [])]
        kind = r.choices(
            ("exact", "key", "wrong", "all", "cordon", "not-ready", "noexecute"),
            weights=(5, 3, 2, 1, 1, 1, 1),
        )[0]
        if kind == "exact" and taints:
            t = r.choice(taints)
            out = {"key": t["key"], "operator": "Equal", "value": t.get("value", ""), "effect": t["effect"]}
            if r.random() < 0.3:
                out.pop("effect")  # any effect
            return out
        if kind == "all":
            return {"operator": "Exists"}
        if kind == "cordon":
            return {"key": UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"}
        if kind == "not-ready":
            return {"key": r.choice((NOT_READY, UNREACHABLE)), "operator": "Exists", "effect": "NoSchedule"}
        if kind == "noexecute":
            return {
                "key": r.choice(TAINT_KEYS),
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": r.choice((0, 60)),
            }
        out = {"key": r.choice(TAINT_KEYS), "operator": "Exists"}
        if kind == "wrong":
            out = {"key": out["key"], "operator": "Equal", "value": "nope"}
        if r.random() < 0.5:
            out["effect"] = r.choice(EFFECTS)
        return out

    # ------------------------------------------------------------------ flagged features
    def pod_term(self, rng: random.Random | None = None) -> dict[str, Any]:
        """A PodAffinityTerm (pod affinity, anti-affinity, and bound pods' terms), drawn from
        ``rng`` (the case's stream when None)."""
        r = rng or self.rng
        if r.random() < 0.7:
            selector: dict[str, Any] = {"matchLabels": {"app": r.choice(APPS)}}
        else:
            selector = {"matchExpressions": [{"key": "app", "operator": "In", "values": r.sample(APPS, 2)}]}
        term: dict[str, Any] = {"labelSelector": selector, "topologyKey": r.choice(TOPOLOGY_KEYS)}
        roll = r.random()
        if roll < 0.25:
            term["namespaces"] = [str(r.choice(self.c.namespaces)["metadata"]["name"])]
        elif roll < 0.45:
            term["namespaceSelector"] = {"matchLabels": {"team": r.choice(TEAMS)}} if r.random() < 0.7 else {}
        if r.random() < 0.15:
            term["matchLabelKeys"] = ["version"]
        if r.random() < 0.1:
            term["mismatchLabelKeys"] = ["tier"]
        return term

    def existing_terms(self, spec: dict[str, Any]) -> None:
        """A bound pod's terms that score the incoming pods they match (kube-scheduler's
        InterPodAffinity: its preferred terms by their weight, its required affinity by
        ``hardPodAffinityWeight``); a required anti-affinity already there stays."""
        r = self.scoring_rng
        affinity = spec.setdefault("affinity", {})
        for kind in ("podAffinity", "podAntiAffinity"):
            if kind == "podAffinity" and r.random() < 0.3:
                affinity.setdefault(kind, {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
                    self.pod_term(r)
                ]
            if r.random() < 0.6:
                affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
                    {"weight": r.randint(1, 100), "podAffinityTerm": self.pod_term(r)}
                    for _ in range(r.randint(1, 2))
                ]

    def spread(self) -> list[dict[str, Any]]:
        r = self.rng
        out: list[dict[str, Any]] = []
        seen = set()
        for _ in range(r.randint(1, 2)):
            key, when = r.choice(TOPOLOGY_KEYS), r.choice(("DoNotSchedule", "ScheduleAnyway"))
            if (key, when) in seen:
                continue
            seen.add((key, when))
            c: dict[str, Any] = {
                "maxSkew": r.randint(1, 3),
                "topologyKey": key,
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": r.choice(APPS)}},
            }
            if when == "DoNotSchedule" and r.random() < 0.2:
                c["minDomains"] = r.randint(1, 4)
            if r.random() < 0.3:
                c["nodeAffinityPolicy"] = r.choice(("Honor", "Ignore"))
            if r.random() < 0.3:
                c["nodeTaintsPolicy"] = r.choice(("Honor", "Ignore"))
            if r.random() < 0.2:
                c["matchLabelKeys"] = ["version"]
            out.append(c)
        return out

    def volumes(self) -> None:
        """StorageClasses, PVs (some bound to claims), claims, CSINodes."""
        r, tag = self.rng, self.tag
        classes = {
            "local": ("WaitForFirstConsumer", "kubernetes.io/no-provisioner"),
            "immediate": ("Immediate", "example.com/none"),
            "csi": ("WaitForFirstConsumer", CSI_DRIVER),
        }
        for name, (mode, provisioner) in classes.items():
            self.c.cluster.append(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": f"{tag}-{name}"},
                    "provisioner": provisioner,
                    "volumeBindingMode": mode,
                }
            )
        nodes = self.c.nodes
        for node in nodes:
            if r.random() < 0.5:
                name = node["metadata"]["name"]
                self.csi_nodes.add(name)
                self.c.cluster.append(
                    {
                        "apiVersion": "storage.k8s.io/v1",
                        "kind": "CSINode",
                        "metadata": {"name": name},
                        "spec": {
                            "drivers": [
                                {
                                    "name": CSI_DRIVER,
                                    "nodeID": name,
                                    "allocatable": {"count": r.randint(0, 2)},
                                }
                            ]
                        },
                    }
                )
        for k in range(r.randint(2, 7)):
            pv_name, claim_name = f"{tag}-pv{k}", f"{tag}-claim{k}"
            ns = self.namespace()
            kind = r.choice(("local", "zonal", "csi"))
            mode = r.choices(("ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"), weights=(5, 3, 1))[0]
            size = r.choice(("1Gi", "10Gi"))
            pv: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv_name},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": [mode],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": f"{tag}-{'csi' if kind == 'csi' else 'local'}",
                },
                "status": {"phase": "Available"},
            }
            if kind == "csi":
                pv["spec"]["csi"] = {"driver": CSI_DRIVER, "volumeHandle": pv_name}
            else:
                pv["spec"]["local"] = {"path": f"/mnt/{pv_name}"}
            if kind == "local" or kind == "csi":
                host = r.choice(nodes)["metadata"]["name"]
                term = {"key": HOSTNAME, "operator": "In", "values": [host]}
            else:
                term = {"key": ZONE, "operator": "In", "values": [r.choice(sorted(self.label_values[ZONE]))]}
                pv["metadata"]["labels"] = {ZONE: term["values"][0]}
            pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}}
            claim: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim_name, "namespace": ns},
                "spec": {
                    "accessModes": [mode],
                    "resources": {"requests": {"storage": "1Gi"}},
                    "storageClassName": pv["spec"]["storageClassName"],
                },
                "status": {"phase": "Pending"},
            }
            state = r.choices(("bound", "unbound", "immediate"), weights=(5, 3, 1))[0]
            if state == "bound":
                claim["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
                claim["spec"]["volumeName"] = pv_name
                claim["status"] = {"phase": "Bound", "accessModes": [mode], "capacity": {"storage": size}}
                pv["spec"]["claimRef"] = {
                    "kind": "PersistentVolumeClaim",
                    "namespace": ns,
                    "name": claim_name,
                }
                pv["status"] = {"phase": "Bound"}
            elif state == "immediate":
                claim["spec"]["storageClassName"] = f"{tag}-immediate"
            self.c.cluster.append(pv)
            self.c.claims.append(claim)

    def use_claims(self, spec: dict[str, Any], ns: str, missing: bool) -> None:
        """Mount one or two of the claims of namespace ``ns`` (``missing``: now and then also
        one that does not exist)."""
        r = self.rng
        claims = [str(c["metadata"]["name"]) for c in self.c.claims if c["metadata"]["namespace"] == ns]
        picked = r.sample(claims, min(len(claims), r.randint(1, 2)))
        if missing and r.random() < 0.1:
            picked.append(f"{self.tag}-missing")
        if picked:
            spec["volumes"] = [
                {"name": f"v{i}", "persistentVolumeClaim": {"claimName": n}} for i, n in enumerate(picked)
            ]


# ---------------------------------------------------------------------------------- DRA
GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
# An attribute both drivers publish, under a domain of its own (matchAttribute across them).
NUMA = "topo.example.com/numa"
DRA_API = "resource.k8s.io/v1"
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"
# Request selectors per driver: none can fail at run time on a device of its driver (every one
# of them has these attributes and capacities; ``pcieRoot`` only with ``in``).
GPU_SELECTORS = (
    "device.attributes['gpu.example.com'].model == 'h100'",
    "device.attributes['gpu.example.com'].model != 'l4'",
    "device.attributes['gpu.example.com'].index >= 1",
    "device.attributes['gpu.example.com'].healthy",
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.capacity['gpu.example.com'].memory.isLessThan(quantity('80Gi'))",
    "device.attributes['gpu.example.com'].fw.isGreaterThan(semver('1.5.0'))",
    "device.attributes['gpu.example.com'].fw.compareTo(semver('2.0.0')) < 0",
    "'pcieRoot' in device.attributes['gpu.example.com']",
    "device.attributes['topo.example.com'].numa == 0",
)
NIC_SELECTORS = (
    "device.attributes['nic.example.com'].speed >= 100",
    "device.attributes['nic.example.com'].rdma",
    "device.attributes['topo.example.com'].numa == 1",
)


def _in_zone(zone: str) -> dict[str, Any]:
    """A NodeSelector of the nodes of ``zone``."""
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}


def _cel(*exprs: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": e}} for e in exprs]


class _Dra:
    """The DRA objects of one case (flag ``dra``), drawn from a stream of their own."""

    def __init__(self, rng: random.Random, case: Case) -> None:
        self.rng = rng
        self.c = case
        self.tag = case.tag
        # Per class: its driver (request selectors are the driver's).
        self.classes: dict[str, str] = {}
        # Devices an allocated claim can take, per node: (driver, pool, device), node-local and
        # of a complete pool; and the devices of the pools for every node.
        self.local: dict[str, list[tuple[str, str, str]]] = {}
        self.fabric: list[tuple[str, str, str]] = []
        self.taken: set[tuple[str, str, str]] = set()
        self.allocated: dict[str, list[str]] = {}  # namespace -> allocated claims
        # Draws added later (moved pools, adminAccess, subrequest names in constraints): a
        # stream of their own, so that the cases drawn before them stay as they were.
        self.more = random.Random(f"{case.seed}:{case.index}:dra-more")
        self.admin_ns: set[str] = set()
        self.admin = False  # whether the claim being drawn may ask for admin access

    def generate(self) -> None:
        if self.more.random() < 0.4:
            # adminAccess is admitted only in a namespace so labelled.
            ns = self.c.namespaces[0]["metadata"]
            ns["labels"][ADMIN_ACCESS] = "true"
            self.admin_ns.add(str(ns["name"]))
        self.device_classes()
        for node in self.c.nodes:
            self.node_slices(node)
        self.shared_slices()
        for pod in self.c.bound:
            self.bound_claims(pod)
        self.leftover_claim()
        for pod in self.c.pods:
            self.pod_claims(pod)
        self.taint_rules()

    # ------------------------------------------------------------------ taint rules
    def taint_rules(self) -> None:
        """Now and then DeviceTaintRules (a stream of their own: the cases drawn before them
        stay as they were): a node's GPU, a node's whole GPU pool, or every device of a driver,
        tainted NoSchedule, NoExecute or None; some pending claims' requests tolerate them."""
        r = random.Random(f"{self.c.seed}:{self.c.index}:dra-taints")
        if r.random() < 0.3:
            return
        keys: list[tuple[str, str, str]] = []
        for i in range(r.choice((1, 2, 2, 3))):
            key, value = f"example.com/{r.choice(('faulty', 'drain'))}", r.choice(("", "ecc", "xid-79"))
            effect = r.choices(("NoSchedule", "NoExecute", "None"), weights=(6, 3, 1))[0]
            keys.append((key, value, effect))
            gpus = [d for devs in self.local.values() for d in devs if d[0] == GPU_DRIVER]
            roll = r.random()
            if gpus and roll < 0.3:
                driver, pool, device = r.choice(gpus)
                selector: dict[str, Any] = {"driver": driver, "pool": pool, "device": device}
            elif gpus and roll < 0.85:
                selector = {"pool": r.choice(gpus)[1]}
            else:
                selector = {"driver": r.choice((GPU_DRIVER, NIC_DRIVER))}
            taint = {"key": key, "effect": effect, **({"value": value} if value else {})}
            self.c.dra.append(
                {
                    "apiVersion": DRA_API,
                    "kind": "DeviceTaintRule",
                    "metadata": {"name": f"{self.tag}-taint-{i}"},
                    "spec": {"deviceSelector": selector, "taint": taint},
                }
            )
        for obj in self.c.dra:
            if obj["kind"] != "ResourceClaim" or "status" in obj or r.random() > 0.4:
                continue
            for req in obj["spec"]["devices"]["requests"]:
                key, value, effect = r.choice(keys)
                tol: dict[str, Any] = (
                    {"key": key, "operator": "Exists"}
                    if r.random() < 0.5
                    else {"key": key, "operator": "Equal", "value": value, "effect": effect}
                )
                for one in [req["exactly"]] if "exactly" in req else req.get("firstAvailable") or []:
                    one["tolerations"] = [tol]

    # ------------------------------------------------------------------ classes and slices
    def device_classes(self) -> None:
        r, tag = self.rng, self.tag
        gpu = f"device.driver == '{GPU_DRIVER}'"
        specs: dict[str, tuple[str, list[str]]] = {
            f"{tag}-gpu": (GPU_DRIVER, [gpu]),
            f"{tag}-gpu-big": (
                GPU_DRIVER,
                [gpu, "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"],
            ),
            f"{tag}-nic": (NIC_DRIVER, [f"device.driver == '{NIC_DRIVER}'"]),
        }
        if r.random() < 0.6:
            extra = ["device.attributes['gpu.example.com'].healthy"]
            if r.random() < 0.5:
                extra.append("device.attributes['gpu.example.com'].fw.isGreaterThan(semver('1.2.3'))")
            specs[f"{tag}-gpu-healthy"] = (GPU_DRIVER, [gpu, *extra])
        for name, (driver, exprs) in specs.items():
            self.classes[name] = driver
            self.c.dra.append(
                {
                    "apiVersion": DRA_API,
                    "kind": "DeviceClass",
                    "metadata": {"name": name},
                    "spec": {"selectors": _cel(*exprs)},
                }
            )

    def gpu(self, name: str, index: int, rng: random.Random | None = None) -> dict[str, Any]:
        r = rng or self.rng
        attrs: dict[str, Any] = {
            "model": {"string": r.choice(("a100", "h100", "h100", "l4"))},
            "index": {"int": index},
            "healthy": {"bool": r.random() < 0.85},
            "fw": {"version": r.choice(("1.2.3", "1.10.0", "2.0.0-rc.1", "2.0.0"))},
            NUMA: {"int": r.randint(0, 1)},
        }
        if r.random() < 0.6:
            attrs["pcieRoot"] = {"string": r.choice(("pci0", "pci1"))}
        memory = r.choice(("16Gi", "40Gi", "80Gi", "81920Mi"))
        return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}

    def nic(self, name: str) -> dict[str, Any]:
        r = self.rng
        attrs = {
            "speed": {"int": r.choice((10, 100, 400))},
            "rdma": {"bool": r.random() < 0.5},
            NUMA: {"int": r.randint(0, 1)},
        }
        return {"name": name, "attributes": attrs}

    def slice(
        self,
        name: str,
        driver: str,
        pool: str,
        devices: list[dict[str, Any]],
        where: dict[str, Any],
        generation: int = 1,
        count: int = 1,
    ) -> None:
        self.c.dra.append(
            {
                "apiVersion": DRA_API,
                "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {
                    "driver": driver,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                    **where,
                    "devices": devices,
                },
            }
        )

    def node_slices(self, node: dict[str, Any]) -> None:
        """The node's GPUs (one pool named after it: sometimes in 2 slices, sometimes missing
        one of them, sometimes beside an older generation's slice, now and then with a device
        name twice) and NICs."""
        r = self.rng
        name = str(node["metadata"]["name"])
        where = {"nodeName": name}
        self.local[name] = []
        if r.random() < 0.8:
            gpus = [self.gpu(f"gpu-{i}", i) for i in range(r.choice((1, 2, 2, 3, 4, 4)))]
            generation = 1
            if r.random() < 0.12:
                generation = 2
                old = [self.gpu(f"old-{i}", i) for i in range(r.randint(1, 2))]
                self.slice(f"{name}-gpu-old", GPU_DRIVER, name, old, where, generation=1)
            usable = True
            if len(gpus) >= 2 and r.random() < 0.3:
                half = r.randint(1, len(gpus) - 1)
                first, second = gpus[:half], gpus[half:]
                if r.random() < 0.05:
                    second[0] = {**second[0], "name": first[0]["name"]}  # an invalid pool
                    usable = False
                self.slice(f"{name}-gpu-0", GPU_DRIVER, name, first, where, generation, count=2)
                if r.random() < 0.15:
                    usable = False  # incomplete: the second slice is not published yet
                else:
                    self.slice(f"{name}-gpu-1", GPU_DRIVER, name, second, where, generation, count=2)
            else:
                self.slice(f"{name}-gpu", GPU_DRIVER, name, gpus, where, generation)
            if usable:
                self.local[name] += [(GPU_DRIVER, name, str(d["name"])) for d in gpus]
        if r.random() < 0.4:
            nics = [self.nic(f"nic-{i}") for i in range(r.randint(1, 2))]
            self.slice(f"{name}-nic", NIC_DRIVER, name, nics, where)
            self.local[name] += [(NIC_DRIVER, name, str(d["name"])) for d in nics]

    def shared_slices(self) -> None:
        """Now and then GPUs that the nodes of a zone reach (a node selector), or NICs every
        node reaches."""
        r, tag = self.rng, self.tag
        zones = sorted(
            {str(n["metadata"]["labels"][ZONE]) for n in self.c.nodes if ZONE in n["metadata"]["labels"]}
        )
        if zones and r.random() < 0.3:
            zone = r.choice(zones)
            gpus = [self.gpu(f"gpu-{i}", i) for i in range(r.randint(1, 2))]
            generation = 1
            more = self.more
            if len(zones) > 1 and more.random() < 0.4:
                # The driver moved the pool to this zone: the older generation's slice still
                # serves another zone (its nodes keep its devices: no newer slice reaches them).
                generation = 2
                before = more.choice([z for z in zones if z != zone])
                old = [self.gpu(f"gpu-{i}", i, more) for i in range(more.randint(1, 2))]
                self.slice(
                    f"{tag}-{zone}-gpu-old",
                    GPU_DRIVER,
                    f"{tag}-{zone}",
                    old,
                    {"nodeSelector": _in_zone(before)},
                )
            self.slice(
                f"{tag}-{zone}-gpu",
                GPU_DRIVER,
                f"{tag}-{zone}",
                gpus,
                {"nodeSelector": _in_zone(zone)},
                generation,
            )
        if r.random() < 0.2:
            nics = [self.nic(f"nic-{i}") for i in range(r.randint(1, 2))]
            pool = f"{tag}-fabric"
            self.slice(f"{tag}-fabric-nic", NIC_DRIVER, pool, nics, {"allNodes": True})
            self.fabric = [(NIC_DRIVER, pool, str(d["name"])) for d in nics]

    # ------------------------------------------------------------------ claims
    def claim(
        self, name: str, ns: str, requests: list[dict[str, Any]], constraints: list[dict[str, Any]]
    ) -> dict[str, Any]:
        devices: dict[str, Any] = {"requests": requests}
        if constraints:
            devices["constraints"] = constraints
        return {
            "apiVersion": DRA_API,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": devices},
        }

    def allocated_claim(
        self, name: str, ns: str, node: str | None, devices: list[tuple[str, str, str]], pod: str | None
    ) -> dict[str, Any]:
        """A claim already allocated (as kube-scheduler writes it) to ``devices``, reserved for
        the bound pod ``pod`` (by name; the runner puts in its UID)."""
        driver = devices[0][0]
        cls = f"{self.tag}-{'gpu' if driver == GPU_DRIVER else 'nic'}"
        exactly = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": len(devices)}
        claim = self.claim(name, ns, [{"name": "dev", "exactly": exactly}], [])
        allocation: dict[str, Any] = {
            "devices": {
                "results": [{"request": "dev", "driver": d, "pool": p, "device": x} for d, p, x in devices]
            }
        }
        if node is not None:
            allocation["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        claim["status"] = {"allocation": allocation}
        if pod is not None:
            claim["status"]["reservedFor"] = [{"resource": "pods", "name": pod, "uid": ""}]
        self.taken.update(devices)
        if pod is not None:
            # Only a claim reserved for a bound pod is shared with the pods asked about: for a
            # pod that fits nowhere (the oracle's extender fails every node) kube-scheduler's
            # PostFilter deallocates an allocated claim of the pod that nobody reserved.
            self.allocated.setdefault(ns, []).append(name)
        return claim

    def free_devices(self, node: str) -> list[tuple[str, str, str]]:
        first = next(iter(sorted({d for d, _, _ in self.local.get(node, [])})), None)
        return [d for d in self.local.get(node, []) if d not in self.taken and d[0] == first]

    def bound_claims(self, pod: dict[str, Any]) -> None:
        """Some bound pods hold devices of their node (or of the fabric) through a claim."""
        r = self.rng
        node = str(pod["spec"]["nodeName"])
        ns = str(pod["metadata"]["namespace"])
        roll = r.random()
        if roll < 0.35:
            free = self.free_devices(node)
            if not free:
                return
            devices = r.sample(free, min(len(free), r.choice((1, 1, 2))))
            where: str | None = node
        elif roll < 0.42:
            free = [d for d in self.fabric if d not in self.taken]
            if not free:
                return
            devices, where = [r.choice(free)], None
        else:
            return
        name = f"{pod['metadata']['name']}-dev"
        self.c.dra.append(self.allocated_claim(name, ns, where, devices, str(pod["metadata"]["name"])))
        pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": name}]

    def leftover_claim(self) -> None:
        """Now and then a claim still allocated whose pod is gone: its devices stay in use."""
        r = self.rng
        nodes = [n for n in sorted(self.local) if self.free_devices(n)]
        if nodes and r.random() < 0.2:
            node = r.choice(nodes)
            ns = str(self.c.namespaces[0]["metadata"]["name"])
            device = r.choice(self.free_devices(node))
            self.c.dra.append(self.allocated_claim(f"{self.tag}-leftover", ns, node, [device], None))

    def exactly(self, cls: str | None = None, all_devices: bool = False) -> dict[str, Any]:
        r = self.rng
        if cls is None:
            # Mostly plain GPUs: most pods asked about should find a node somewhere.
            names = sorted(self.classes)
            weights = [3 if n == f"{self.tag}-gpu" else 1 for n in names]
            cls = r.choices(names, weights=weights)[0]
        out: dict[str, Any] = {"deviceClassName": cls}
        if all_devices:
            out["allocationMode"] = "All"
        else:
            out["allocationMode"] = "ExactCount"
            nic = self.classes[cls] == NIC_DRIVER
            out["count"] = r.choices((1, 2, 3), weights=(8, 1, 0) if nic else (6, 3, 1))[0]
        if r.random() < 0.35:
            pool = GPU_SELECTORS if self.classes[cls] == GPU_DRIVER else NIC_SELECTORS
            out["selectors"] = _cel(*r.sample(pool, r.choice((1, 1, 2))))
        if self.admin and self.more.random() < 0.25:
            out["adminAccess"] = True  # devices in use or not, and it holds none
        return out

    def request(self, name: str) -> tuple[dict[str, Any], bool]:
        """A request, and whether it takes every matching device (no constraint may name it:
        kube-scheduler fails the pod when a constraint refuses one of them)."""
        r = self.rng
        kind = r.choices(("exactly", "all", "first"), weights=(6, 1, 2))[0]
        if kind == "first":
            subs = [{"name": f"s{k}", **self.exactly()} for k in range(r.randint(2, 3))]
            return {"name": name, "firstAvailable": subs}, False
        return {"name": name, "exactly": self.exactly(all_devices=kind == "all")}, kind == "all"

    def sub_name(self, name: str, requests: list[dict[str, Any]]) -> str:
        """A request's name in a constraint: now and then, for a firstAvailable request, one
        of its subrequests (``request/sub``: the constraint holds only when that one is
        chosen)."""
        req = next(q for q in requests if q["name"] == name)
        subs = req.get("firstAvailable")
        if subs and self.more.random() < 0.4:
            return f"{name}/{self.more.choice(subs)['name']}"
        return name

    def pod_claims(self, pod: dict[str, Any]) -> None:
        """Claims for a pod asked about: its own (not allocated yet), now and then one a bound
        pod holds. Never one that does not exist: kube-scheduler's PreEnqueue holds such a pod
        back without a verdict (ours refuses it: no node either way)."""
        r = self.rng
        if r.random() > 0.45:
            return
        ns = str(pod["metadata"]["namespace"])
        pname = str(pod["metadata"]["name"])
        refs: list[dict[str, Any]] = []
        for k in range(r.choices((1, 2), weights=(4, 1))[0]):
            roll = r.random()
            if roll < 0.1 and self.allocated.get(ns):
                refs.append({"name": f"rc{k}", "resourceClaimName": r.choice(self.allocated[ns])})
                continue
            requests, every = [], set()
            self.admin = ns in self.admin_ns
            for j in range(r.choices((1, 2), weights=(3, 1))[0]):
                req, all_devices = self.request(f"r{j}")
                requests.append(req)
                if all_devices:
                    every.add(req["name"])
            constraints = []
            names = [str(q["name"]) for q in requests if q["name"] not in every]
            if names and r.random() < 0.3:
                attribute = r.choice((NUMA, NUMA, "gpu.example.com/model", "gpu.example.com/pcieRoot"))
                constraint: dict[str, Any] = {"matchAttribute": attribute}
                if every or r.random() < 0.5:
                    over = r.sample(names, r.randint(1, len(names)))
                    constraint["requests"] = [self.sub_name(n, requests) for n in over]
                constraints.append(constraint)
            name = f"{pname}-rc{k}"
            self.c.dra.append(self.claim(name, ns, requests, constraints))
            refs.append({"name": f"rc{k}", "resourceClaimName": name})
        pod["spec"]["resourceClaims"] = refs


def _milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _mebi(q: str) -> int:
    return int(q[:-2]) * 1024 if q.endswith("Gi") else int(q[:-2]) if q.endswith("Mi") else 0


def names(objs: Sequence[dict[str, Any]]) -> list[str]:
    """The names of objects, in order."""
    return [str(o["metadata"]["name"]) for o in objs]
