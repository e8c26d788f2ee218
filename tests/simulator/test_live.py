"""Conversion of recorded live-cluster list responses into simulator input."""

from __future__ import annotations

from simulator.engine import simulate
from simulator.live import inputs_from_lists

# Shapes as kubernetes-asyncio returns them: sanitize_for_serialization() output for core
# kinds (no kind/apiVersion per item, managedFields present) and plain dicts for CRDs.
RECORDED = {
    "Node": [
        {
            "metadata": {
                "name": "n0",
                "uid": "11111111-0000-0000-0000-000000000000",
                "resourceVersion": "42",
                "managedFields": [{"manager": "kubelet"}],
                "labels": {"kubernetes.io/hostname": "n0"},
            },
            "spec": {},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        {
            "metadata": {"name": "n1", "uid": "22222222-0000-0000-0000-000000000000"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        },
    ],
    "Pod": [
        {
            "metadata": {"name": "web", "namespace": "prod", "uid": "p-1"},
            "spec": {
                "nodeName": "n0",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
            "status": {"phase": "Running"},
        },
        {
            "metadata": {"name": "done", "namespace": "prod", "uid": "p-2"},
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}],
            },
            "status": {"phase": "Succeeded"},
        },
    ],
    "ConfigMap": [
        {"metadata": {"name": "kube-root-ca.crt", "namespace": "prod"}, "data": {"ca.crt": "..."}},
        {
            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
            "data": {"volcano-scheduler.conf": 'actions: "enqueue, allocate"\n'},
        },
    ],
    "PriorityClass": [{"metadata": {"name": "high"}, "value": 1000}],
    "HyperNode": [
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "leaf", "uid": "h-1"},
            "spec": {
                "tier": 1,
                "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n"}}}],
            },
        }
    ],
    "Queue": [],
    "PodGroup": [],
    "Job": [],
}


def test_inputs_from_lists_converts_and_filters():
    inputs = inputs_from_lists(RECORDED, origin="cluster:test")
    kinds = [(o.kind, o.name) for o in inputs.objects]
    # Terminated pods hold nothing; unrelated ConfigMaps are not kept; default Queue added.
    assert ("Pod", "done") not in kinds
    assert ("ConfigMap", "kube-root-ca.crt") not in kinds
    assert ("Queue", "default") in kinds
    node = next(o for o in inputs.objects if o.name == "n0")
    assert node.obj["apiVersion"] == "v1" and node.obj["kind"] == "Node"
    assert "managedFields" not in node.obj["metadata"] and "resourceVersion" not in node.obj["metadata"]
    assert node.obj["metadata"]["uid"] == "11111111-0000-0000-0000-000000000000"
    assert node.existing and str(node.source) == "cluster:test:Node/n0"
    pc = next(o for o in inputs.objects if o.kind == "PriorityClass")
    assert pc.obj["apiVersion"] == "scheduling.k8s.io/v1"
    assert inputs.scheduler_conf == 'actions: "enqueue, allocate"\n'
    assert inputs.scheduler_conf_source == "cluster:test:ConfigMap/volcano-system/volcano-scheduler-configmap"


def test_live_objects_skip_admission_and_simulate():
    inputs = inputs_from_lists(RECORDED)
    result = simulate(inputs)
    assert result.rejected == []
    # Nothing is pending, so nothing is bound; the running pod stays where it is.
    assert result.bindings == {}
    web = result.get("Pod", "prod", "web")
    assert web is not None and web["spec"]["nodeName"] == "n0"
    # Existing objects are not admitted again, but controllers still reconcile them.
    hn = result.get("HyperNode", None, "leaf")
    assert hn is not None and hn["status"]["nodeCount"] == 2


def test_invalid_live_object_is_ignored_with_a_warning():
    lists = dict(RECORDED)
    lists["HyperNode"] = [
        *RECORDED["HyperNode"],
        {"metadata": {"name": "broken"}, "spec": {"tier": "high", "members": []}},
    ]
    result = simulate(inputs_from_lists(lists))
    assert any(w.startswith("HyperNode broken is invalid and ignored: spec.tier") for w in result.warnings)
    hn = result.get("HyperNode", None, "leaf")
    assert hn is not None and hn["status"]["nodeCount"] == 2


async def test_fetch_lists_reads_only_and_tolerates_missing_kinds(aiohttp_server, tmp_path):
    """The adapter against a fake API server: GET only, 404 = none, 403 = skipped with a warning."""
    from aiohttp import web

    from simulator.live import fetch_lists

    seen: list[tuple[str, str]] = []

    def listing(kind: str, api_version: str, items: list) -> web.Response:
        return web.json_response(
            {"kind": f"{kind}List", "apiVersion": api_version, "metadata": {}, "items": items}
        )

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.method, request.path))
        path = request.path
        if path == "/api/v1/nodes":
            return listing("Node", "v1", RECORDED["Node"])
        if path == "/api/v1/pods":
            return listing("Pod", "v1", RECORDED["Pod"])
        if path == "/api/v1/configmaps":
            return web.json_response({"kind": "Status", "code": 403, "reason": "Forbidden"}, status=403)
        if path == "/apis/scheduling.k8s.io/v1/priorityclasses":
            return listing("PriorityClass", "scheduling.k8s.io/v1", RECORDED["PriorityClass"])
        if path == "/apis/topology.volcano.sh/v1alpha1/hypernodes":
            return listing("HyperNode", "topology.volcano.sh/v1alpha1", RECORDED["HyperNode"])
        return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    server = await aiohttp_server(app)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{server.port}"}}}}]
users: [{{name: me, user: {{token: t}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: me}}}}]
current-context: fake
"""
    )
    lists, warnings = await fetch_lists(str(kubeconfig), "fake")
    assert {m for m, _ in seen} == {"GET"}
    assert [n["metadata"]["name"] for n in lists["Node"]] == ["n0", "n1"]
    assert lists["ConfigMap"] == [] and lists["Queue"] == [] and lists["Job"] == []
    assert warnings == ["not allowed to list ConfigMap objects; simulating without them"]
    inputs = inputs_from_lists(lists)
    assert {o.name for o in inputs.of_kind("HyperNode")} == {"leaf"}
    pod = next(o for o in inputs.of_kind("Pod") if o.name == "web")
    assert pod.obj["spec"]["nodeName"] == "n0"
    assert pod.obj["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}


def test_cluster_snapshot_plus_files(monkeypatch, tmp_path):
    """``simulate --cluster-snapshot FILE``: live objects as they are, file objects admitted on top."""
    import json

    from typer.testing import CliRunner

    import simulator.live
    from simulator.cli import app

    calls: list[tuple[str | None, str | None]] = []

    def fake_read_cluster(kubeconfig=None, context=None):
        calls.append((kubeconfig, context))
        return inputs_from_lists(RECORDED)

    monkeypatch.setattr(simulator.live, "read_cluster", fake_read_cluster)
    extra = tmp_path / "job.yaml"
    extra.write_text(
        """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j, namespace: prod}
spec:
  minAvailable: 1
  tasks:
  - name: t0
    replicas: 1
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]}}
"""
    )
    res = CliRunner().invoke(
        app, ["simulate", "--cluster-snapshot", "--context", "prod", str(extra), "-o", "json"]
    )
    assert res.exit_code == 0, res.stderr
    assert calls == [(None, "prod")]
    out = json.loads(res.stdout)
    # n0 has 2 of 4 cpu left (web runs there), so the 3-cpu pod goes to n1.
    assert out["bindings"] == {"prod/j-t0-0": "n1"}
    assert out["pods"]["prod/web"] == {"phase": "Running", "node": "n0"}
    # A file object that clashes with a live one is a duplicate, named with both places.
    clash = tmp_path / "node.yaml"
    clash.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n")
    res = CliRunner().invoke(app, ["simulate", "--cluster-snapshot", str(clash)])
    assert res.exit_code == 2
    assert "Node n0 is defined twice" in res.stderr and "cluster:Node/n0" in res.stderr


def test_live_tree_labels_jobs_by_their_job_name(monkeypatch):
    """``tree --kubeconfig``: a Job's pods are shown under the Job's name, not the generated
    ``<job>-<uid>`` of the PodGroup the Job controller made for it."""
    import copy

    from typer.testing import CliRunner

    import simulator.live
    from simulator.cli import app

    lists = copy.deepcopy(RECORDED)
    pg_name = "train-0c1d2e3f-aaaa-bbbb-cccc-1234567890ab"
    lists["PodGroup"] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": pg_name,
                "namespace": "prod",
                "ownerReferences": [
                    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "j-1"}
                ],
            },
            "spec": {"minMember": 1},
        }
    ]
    lists["Pod"].append(
        {
            "metadata": {
                "name": "train-worker-0",
                "namespace": "prod",
                "uid": "p-3",
                "annotations": {"scheduling.k8s.io/group-name": pg_name},
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        }
    )
    monkeypatch.setattr(
        simulator.live, "read_cluster", lambda kubeconfig=None, context=None: inputs_from_lists(lists)
    )
    res = CliRunner().invoke(app, ["tree", "--kubeconfig", "/dev/null"])
    assert res.exit_code == 0, res.stderr
    assert "prod/train ×1" in res.stdout
    assert pg_name not in res.stdout
    assert "worker-0" in res.stdout  # the node lists the pod by its name within the job
