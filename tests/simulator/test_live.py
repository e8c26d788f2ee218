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
