"""Next to the real Volcano: Volcano's own scheduler (vc-scheduler, built from a snapshot of
volcano-sh/volcano at a release tag by hack/volcano-bin.sh) and hyperplace-scheduler run on the
same cluster under different scheduler names.

Each places only its own pods, neither puts a pod on a node the other has filled (each counts the
other's bound pods against the node), and the PodGroup status each writes survives the other's
cycles. The two gangs arrive one after the other, in both orders, so every decision is made with
the other scheduler's pods already bound: two schedulers that decide at the very same moment can
both pick the same free node, as any two Kubernetes schedulers can (the kubelet then refuses one);
that race is not what this test looks at. Our scheduler's /metrics is scraped too: Volcano's
dashboard query for its end-to-end latency has data.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hyperplace.localup import components as localup
from hyperplace.localup.controlplane import free_port

from ..go_bin import go_built
from . import components
from .conftest import Cluster
from .kube import PODGROUPS, Kubectl, node, pod_node, wait_for

pytestmark = pytest.mark.apiserver

LEASE_NAMESPACE = "hyperplace-system"
OURS = "hyperplace"
VOLCANO = "volcano"
# Volcano's default configuration (its installer's volcano-scheduler.conf).
VOLCANO_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def volcano_scheduler_bin() -> Path:
    """vc-scheduler, or a loud skip saying why it cannot be built here."""
    return go_built("volcano-bin.sh", "SKIPPED: Volcano's scheduler could not be built")


@dataclass
class Both:
    volcano: components.Component
    ours: components.Component
    metrics_port: int
    log_dir: Path

    def describe(self) -> str:
        return f"{self.volcano.tail(30)}\n{self.ours.tail(30)}"


@pytest.fixture(scope="module")
def both(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Both]:
    vc = volcano_scheduler_bin()
    kubectl = cluster.kubectl
    # Volcano's CRDs that hyperplace does not ship but vc-scheduler watches (it waits for every
    # informer to sync): installed as a cluster running Volcano has them. Ours stay for the rest.
    have = {c["metadata"]["name"] for c in kubectl.items("crd")}
    for path in sorted((vc.parent / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] not in have:
            kubectl.run("apply", "--server-side", "-f", str(path))
            wait_for(
                lambda n=crd["metadata"]["name"]: (
                    kubectl.run(  # type: ignore[misc]
                        "wait", "--for=condition=Established", f"crd/{n}", "--timeout=5s", check=False
                    ).returncode
                    == 0
                ),
                f"CRD {crd['metadata']['name']} Established",
                timeout=60,
            )
    if kubectl.run("get", "namespace", LEASE_NAMESPACE, check=False).returncode != 0:
        kubectl.run("create", "namespace", LEASE_NAMESPACE)
    log_dir = tmp_path_factory.mktemp("next-to-volcano")
    # In a directory of its own: vc-scheduler watches the configuration file's directory and
    # reloads on every change there (its own log file beside it would reload it without end).
    conf = tmp_path_factory.mktemp("vc-conf") / "volcano-scheduler.conf"
    conf.write_text(VOLCANO_CONF)
    volcano = components.Component(
        "vc-scheduler",
        [
            str(vc),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--scheduler-name={VOLCANO}",
            f"--scheduler-conf={conf}",
            "--leader-elect=false",
            "--schedule-period=500ms",
            "--enable-metrics",
            f"--listen-address=127.0.0.1:{free_port()}",
            f"--healthz-address=127.0.0.1:{free_port()}",
            "--logtostderr",
            "-v=2",
        ],
        log_dir / "vc-scheduler.log",
    )
    port = free_port()
    ours = components.Component(
        "hyperplace-scheduler",
        localup.scheduler_argv(
            cluster.kubeconfig,
            lease_namespace=LEASE_NAMESPACE,
            metrics_port=port,
            identity=f"next-to-volcano-{uuid.uuid4().hex[:6]}",
            # Its own Lease: a scheduler another module started may still hold the usual one.
            extra=[f"--scheduler-name={OURS}", f"--lease-name=next-to-volcano-{uuid.uuid4().hex[:6]}"],
        ),
        log_dir / "hyperplace-scheduler.log",
        env={"KUBECONFIG": str(cluster.kubeconfig), "POD_NAME": "hyperplace-scheduler"},
    )
    b = Both(volcano, ours, port, log_dir)
    try:
        yield b
    finally:
        ours.stop()
        volcano.stop()


def podgroup(name: str, ns: str, min_member: int, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, "queue": queue},
    }


def open_queue(kubectl: Kubectl, name: str) -> None:
    """A Queue in state Open, as a queue controller (Volcano's or ours) leaves it: vc-scheduler
    allocates nothing in a queue whose status says otherwise."""
    kubectl.create(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1},
            }
        ]
    )
    kubectl.run(
        "patch", "queue", name, "--subresource=status", "--type=merge", "-p", '{"status":{"state":"Open"}}'
    )


def pod(name: str, ns: str, group: str, scheduler: str, label: str) -> dict[str, Any]:
    res = {"cpu": "8", "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"hyperplace.io/next-to-volcano": label},
            "containers": [
                {"name": "c", "image": "example.com/noop", "resources": {"requests": res, "limits": res}}
            ],
        },
    }


def gang(kubectl: Kubectl, ns: str, group: str, scheduler: str, label: str, size: int) -> None:
    objs = [podgroup(group, ns, size, ns)] + [
        pod(f"{group}-{i}", ns, group, scheduler, label) for i in range(size)
    ]
    kubectl.create(objs)


def bound(kubectl: Kubectl, ns: str, group: str, size: int) -> dict[str, str] | None:
    pods = [p for p in kubectl.items("pods", "-n", ns) if p["metadata"]["name"].startswith(f"{group}-")]
    placed = {p["metadata"]["name"]: pod_node(p) for p in pods}
    if len(placed) == size and all(placed.values()):
        return {k: v for k, v in placed.items() if v}
    return None


def phase(kubectl: Kubectl, ns: str, group: str) -> str | None:
    return (kubectl.get(PODGROUPS, "-n", ns, group).get("status") or {}).get("phase")


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(body)
        for s in fam.samples
    }


@pytest.mark.parametrize("first", [VOLCANO, OURS])
def test_each_places_only_its_own_and_never_on_the_others_node(
    cluster: Cluster, both: Both, first: str
) -> None:
    kubectl = cluster.kubectl
    tag = uuid.uuid4().hex[:6]
    ns = f"ntv-{tag}"
    kubectl.run("create", "namespace", ns)
    open_queue(kubectl, ns)
    # Four nodes of 8 cpu; each pod takes a whole node: two gangs of two fill them exactly.
    kubectl.create(
        [node(f"ntv-{tag}-{i}", {"hyperplace.io/next-to-volcano": tag}, cpu="8") for i in range(4)]
    )
    order = [first, OURS if first == VOLCANO else VOLCANO]
    groups = {VOLCANO: "vc", OURS: "hp"}
    placed: dict[str, dict[str, str]] = {}
    for scheduler in order:
        group = groups[scheduler]
        gang(kubectl, ns, group, scheduler, tag, 2)
        placed[scheduler] = wait_for(
            lambda g=group: bound(kubectl, ns, g, 2),  # type: ignore[misc]
            f"{scheduler}'s gang bound",
            timeout=90,
            describe=both.describe,
        )
    # No node holds two pods (each fills its node), and each gang landed on its own nodes.
    nodes = [n for p in placed.values() for n in p.values()]
    assert len(set(nodes)) == 4, placed

    # Each pod was bound by its own scheduler: the Scheduled event names who did it (events are
    # written a moment after the binding).
    def scheduled_by() -> dict[str, str | None] | None:
        events = kubectl.items("events", "-n", ns, "--field-selector", "reason=Scheduled")
        by = {
            e["involvedObject"]["name"]: e.get("reportingComponent") or e.get("source", {}).get("component")
            for e in events
            if e["involvedObject"]["kind"] == "Pod"
        }
        return by if set(by) >= {*placed[OURS], *placed[VOLCANO]} else None

    by_pod = wait_for(scheduled_by, "a Scheduled event for every pod", timeout=30, describe=both.describe)
    assert {by_pod[name] for name in placed[OURS]} == {"hyperplace-scheduler"}, by_pod
    assert {by_pod[name] for name in placed[VOLCANO]} == {VOLCANO}, by_pod
    # The status each wrote stays: both PodGroups Running while both schedulers keep cycling.
    wait_for(
        lambda: phase(kubectl, ns, "vc") == "Running",
        "Volcano's PodGroup Running",
        timeout=30,
        describe=both.describe,
    )
    wait_for(
        lambda: phase(kubectl, ns, "hp") == "Running",
        "our PodGroup Running",
        timeout=30,
        describe=both.describe,
    )

    def statuses() -> dict[str, Any]:
        return {g: kubectl.get(PODGROUPS, "-n", ns, g).get("status") for g in ("vc", "hp")}

    def unschedulable(status: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            c
            for c in status.get("conditions") or []
            if c.get("type") == "Unschedulable" and c["status"] == "True"
        ]

    def settled() -> dict[str, Any] | None:
        # Volcano's scheduler also reads our PodGroup once one of our pods is bound, and a
        # session of it that falls between our two bindings writes "1 Bound, 2 minAvailable"
        # onto it. Ours takes that back, within its 5 s settle (no kubelet reports these pods
        # running). Our running gang is not left reported unschedulable, whoever wrote that;
        # compare from when both statuses have held longer than that settle.
        first = statuses()
        if unschedulable(first["hp"]):
            return None
        time.sleep(6)
        return first if statuses() == first else None

    before = wait_for(
        settled, "both PodGroup statuses settled, ours not Unschedulable", timeout=60, describe=both.describe
    )
    deadline = time.monotonic() + 6  # several cycles of each (500 ms and ~1 s)
    while time.monotonic() < deadline:
        assert phase(kubectl, ns, "vc") == "Running" and phase(kubectl, ns, "hp") == "Running"
        time.sleep(0.5)
    # Nobody rewrites what the other wrote: no condition flips back and forth.
    after = statuses()
    assert after == before
    managers = {
        g: sorted(
            {m["manager"] for m in kubectl.get(PODGROUPS, "-n", ns, g)["metadata"].get("managedFields", [])}
        )
        for g in ("vc", "hp")
    }
    print("PodGroup writers:", managers)


def test_volcanos_e2e_latency_query_has_data_from_our_running_scheduler(both: Both) -> None:
    """histogram_quantile(0.95, sum(rate(volcano_e2e_scheduling_latency_milliseconds_bucket[5m])) by (le))
    over two scrapes of the running process."""
    name = "volcano_e2e_scheduling_latency_milliseconds_bucket"
    before = wait_for(
        lambda: scrape(both.metrics_port) or None, "our /metrics", timeout=30, describe=both.describe
    )
    time.sleep(3)
    after = scrape(both.metrics_port)
    rate = {
        float(dict(labels)["le"]): value - before.get((n, labels), 0.0)
        for (n, labels), value in after.items()
        if n == name
    }
    assert rate[float("inf")] > 0, "no cycle observed between the scrapes"
    rank = 0.95 * rate[float("inf")]
    assert any(count >= rank for le, count in rate.items() if le != float("inf")), rate
