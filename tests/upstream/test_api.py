"""Kubernetes 1.37's own gang API (scheduling.k8s.io/v1beta1) as the models read it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hyperplace.api import format_validation_error
from hyperplace.api.workload import (
    POD_GROUP_INITIALLY_SCHEDULED,
    UpstreamPodGroup,
    Workload,
    as_volcano_podgroup,
    initially_scheduled_conditions,
    is_upstream_job,
    pod_group_name,
    upstream_priority,
)
from hyperplace.kube.objects import podgroup_key_of


def pg(spec: dict, **meta) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns", **meta},
        "spec": spec,
    }


GANG = {
    "workloadRef": {"workloadName": "w", "templateName": "workers"},
    "schedulingPolicy": {"gang": {"minCount": 5}},
    "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
    "disruptionMode": {"all": {}},
    "priorityClassName": "high",
    "priority": 1000,
    "preemptionPolicy": "Never",
    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpus"}],
}


def test_a_gang_podgroup_reads_and_writes_back_unchanged():
    obj = pg(GANG)
    model = UpstreamPodGroup.model_validate(obj)
    assert model.min_count == 5
    assert model.topology_key == "topology.kubernetes.io/rack"
    assert model.spec.workload_ref is not None and model.spec.workload_ref.template_name == "workers"
    assert model.spec.disruption_mode is not None and model.spec.disruption_mode.all is not None
    assert model.to_dict() == obj


def test_a_basic_podgroup_places_pods_one_at_a_time():
    model = UpstreamPodGroup.model_validate(pg({"schedulingPolicy": {"basic": {}}}))
    assert model.min_count == 1
    assert model.topology_key is None
    job = as_volcano_podgroup(model)
    assert job.spec.min_member == 1 and job.spec.network_topology is None


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount"),
        ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}, "spec.schedulingPolicy"),
        ({"schedulingPolicy": {}}, "spec.schedulingPolicy"),
        (
            {
                "schedulingPolicy": {"basic": {}},
                "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]},
            },
            "spec.schedulingConstraints.topology",
        ),
        ({"schedulingPolicy": {"basic": {}}, "preemptionPolicy": "Sometimes"}, "spec.preemptionPolicy"),
        (
            {"schedulingPolicy": {"basic": {}}, "disruptionMode": {"single": {}, "all": {}}},
            "spec.disruptionMode",
        ),
    ],
)
def test_an_invalid_podgroup_is_refused_naming_the_field(spec: dict, field: str):
    with pytest.raises(ValidationError) as exc:
        UpstreamPodGroup.model_validate(pg(spec))
    assert any(line.startswith(field) for line in format_validation_error(exc.value)), (
        format_validation_error(exc.value)
    )


def test_a_workload_holds_its_templates():
    obj = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
            "podGroupTemplates": [
                {"name": "workers", **{k: v for k, v in GANG.items() if k != "workloadRef"}}
            ],
        },
    }
    w = Workload.model_validate(obj)
    assert w.spec.pod_group_templates is not None
    assert w.spec.pod_group_templates[0].scheduling_policy.gang is not None
    assert w.to_dict() == obj
    dup = {**obj, "spec": {"podGroupTemplates": [{"name": "a", "schedulingPolicy": {"basic": {}}}] * 2}}
    with pytest.raises(ValidationError):
        Workload.model_validate(dup)


def test_the_job_built_from_a_podgroup_carries_its_minimum_priority_topology_and_our_annotations():
    model = UpstreamPodGroup.model_validate(
        pg(
            GANG,
            annotations={
                "volcano.sh/queue-name": "research",
                "hyperplace.io/relax-topology": "2@10m",
                "unrelated": "x",
            },
        )
    )
    job = as_volcano_podgroup(model)
    assert is_upstream_job(job)
    assert job.key == "ns/g"
    assert job.spec.min_member == 5
    assert job.spec.queue == "research"
    assert job.spec.priority_class_name == "high"
    assert upstream_priority(job) == 1000
    nt = job.spec.network_topology
    assert nt is not None and nt.mode == "hard" and nt.highest_tier_name == "topology.kubernetes.io/rack"
    ann = job.metadata.annotations or {}
    assert ann["hyperplace.io/relax-topology"] == "2@10m"
    assert "unrelated" not in ann


def test_a_pod_names_its_group_in_spec_scheduling_group():
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"schedulingGroup": {"podGroupName": "g"}}}
    assert pod_group_name(pod) == "g"
    assert podgroup_key_of(pod) == "ns/g"
    pod["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "volcano-pg"}
    # A Volcano PodGroup made for the pod on purpose (its workload asked Volcano for a gang or a
    # topology) wins over the Kubernetes one kube-controller-manager may also have made.
    assert podgroup_key_of(pod) == "ns/volcano-pg"
    assert pod_group_name({"spec": {}}) is None


def test_initially_scheduled_is_written_as_kube_scheduler_writes_it_and_never_regresses():
    obj = pg(GANG)
    obj["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "False", "reason": "x"}]}
    conds = initially_scheduled_conditions(obj, False, "cannot place 5 pods", "t0")
    assert conds is not None
    assert conds[0]["type"] == "DisruptionTarget"
    assert conds[1] == {
        "type": POD_GROUP_INITIALLY_SCHEDULED,
        "status": "False",
        "reason": "Unschedulable",
        "message": "cannot place 5 pods",
        "lastTransitionTime": "t0",
    }
    obj["status"]["conditions"] = conds
    assert initially_scheduled_conditions(obj, False, "cannot place 5 pods", "t1") is None
    moved = initially_scheduled_conditions(obj, False, "another reason", "t1")
    assert moved is not None and moved[1]["lastTransitionTime"] == "t0"  # same status: time stands
    placed = initially_scheduled_conditions(obj, True, "", "t2")
    assert placed is not None and placed[1]["status"] == "True" and placed[1]["reason"] == "Scheduled"
    assert placed[1]["lastTransitionTime"] == "t2"
    obj["status"]["conditions"] = placed
    assert initially_scheduled_conditions(obj, False, "lost a pod", "t3") is None
