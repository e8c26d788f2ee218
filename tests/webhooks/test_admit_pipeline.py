"""What ``admit`` does around the single webhooks (the simulator and ``hyperplace validate``)."""

from __future__ import annotations

import copy

import pytest

from webhooks.admission import admit, handled_kind

from .builders import hypernode, job


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0", "labels": {"x": "y"}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg"}},
        {"apiVersion": "example.com/v1", "kind": "Job", "metadata": {"name": "not-volcano"}},
    ],
    ids=lambda o: o["kind"],
)
def test_kinds_without_webhooks_pass_unchanged(obj):
    before = copy.deepcopy(obj)
    out = admit(obj)
    assert out.allowed and out.patch == [] and out.messages == [] and out.warnings == []
    assert out.object == before and out.object is not obj


def test_delete_and_connect_are_not_checked():
    for op in ("DELETE", "CONNECT"):
        assert admit(job(tasks=[]), op).allowed


def test_an_unserved_version_of_our_crd_is_refused():
    j = job()
    j["apiVersion"] = "batch.volcano.sh/v1beta1"
    assert handled_kind(j) == "Job"
    out = admit(j)
    assert out.messages == [
        'apiVersion: Unsupported value: "batch.volcano.sh/v1beta1": supported values: "batch.volcano.sh/v1alpha1"'
    ]


def test_outcome_message_joins_refusals_like_an_admission_review():
    hn = hypernode("Bad_Name", 1)
    out = admit(hn)
    assert len(out.messages) == 2
    assert out.message == "; ".join(out.messages)
    assert out.messages[0] == "spec.members: member must have at least one member"
    assert out.messages[1].startswith('metadata.name: Invalid value: "Bad_Name"')


def test_refused_object_is_still_returned_mutated():
    out = admit(job(tasks=[{"replicas": 2, "minAvailable": 3}]))
    assert not out.allowed
    assert out.object["spec"]["tasks"][0]["name"] == "default0"
    # The defaulted job minAvailable (sum of task minAvailable, 3) is then also too high,
    # exactly as Volcano reports it.
    assert out.messages == [
        "spec.tasks[0].minAvailable: 'minAvailable' is greater than 'replicas' in task: default0, job: train",
        "spec.minAvailable: job 'minAvailable' should not be greater than total replicas in tasks",
    ]
