"""The design documents' examples pass admission exactly as a Volcano user would expect."""

from __future__ import annotations

import pytest

from hyperplace.api import HyperNode
from webhooks.admission import AdmissionContext, admit

from .builders import load_fixture

USER_GUIDE = load_fixture("user_guide_jobs.yaml")


@pytest.mark.parametrize("index", range(len(USER_GUIDE)), ids=["3.3.1", "3.3.2", "3.3.3"])
def test_user_guide_job_is_admitted_with_only_volcano_defaults_added(index):
    job = USER_GUIDE[index]
    out = admit(job)
    assert out.allowed, out.messages
    assert out.warnings == []
    # The guide sets schedulerName and minAvailable; Volcano adds queue, maxRetry and
    # per-task minAvailable/maxRetry, nothing else.
    added = sorted((op["op"], op["path"]) for op in out.patch)
    assert added == [
        ("add", "/spec/maxRetry"),
        ("add", "/spec/queue"),
        ("add", "/spec/tasks/0/maxRetry"),
        ("add", "/spec/tasks/0/minAvailable"),
    ]
    assert out.object["spec"]["tasks"][0]["minAvailable"] == job["spec"]["tasks"][0]["replicas"]


def test_user_guide_partition_job_fits_the_design_tree():
    tree = {
        h["metadata"]["name"]: HyperNode.model_validate(h) for h in load_fixture("design_hypernodes.yaml")
    }
    out = admit(USER_GUIDE[1], ctx=AdmissionContext(hypernodes=tree))
    assert out.allowed and out.warnings == []


def test_user_guide_partition_job_with_swapped_tiers_is_refused():
    job = USER_GUIDE[1]
    job = {**job, "spec": {**job["spec"], "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}
    job["spec"]["tasks"] = [dict(job["spec"]["tasks"][0])]
    job["spec"]["tasks"][0]["partitionPolicy"] = {
        **job["spec"]["tasks"][0]["partitionPolicy"],
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
    }
    out = admit(job)
    assert [m.split(":", 1)[0] for m in out.messages] == [
        "spec.tasks[0].partitionPolicy.networkTopology.highestTierAllowed"
    ]


def test_design_tree_is_admitted_one_hypernode_at_a_time_in_file_order():
    admitted: dict[str, HyperNode] = {}
    for hn in load_fixture("design_hypernodes.yaml"):
        out = admit(hn, ctx=AdmissionContext(hypernodes=dict(admitted)))
        assert out.allowed, (hn["metadata"]["name"], out.messages)
        assert out.warnings == []
        admitted[hn["metadata"]["name"]] = HyperNode.model_validate(out.object)
    assert sorted(admitted) == ["s0", "s1", "s2", "s3", "s4", "s5", "s6"]


def test_design_tree_refuses_a_second_root_claiming_a_rack():
    tree = {
        h["metadata"]["name"]: HyperNode.model_validate(h) for h in load_fixture("design_hypernodes.yaml")
    }
    s7 = load_fixture("design_hypernodes.yaml")[4]  # s4's members under a new name
    s7["metadata"]["name"] = "s7"
    out = admit(s7, ctx=AdmissionContext(hypernodes=tree))
    assert out.messages == [
        'spec.members[0].selector.exactMatch.name: HyperNode "s0" already has a parent "s4"; a HyperNode may have only one parent',
        'spec.members[1].selector.exactMatch.name: HyperNode "s1" already has a parent "s4"; a HyperNode may have only one parent',
    ]


@pytest.mark.parametrize("hn", load_fixture("selector_examples.yaml"), ids=lambda h: h["metadata"]["name"])
def test_api_doc_selector_examples_are_admitted(hn):
    out = admit(hn)
    assert out.allowed, out.messages
    assert out.patch == []
