"""The API models accept Volcano's own YAML unchanged and name fields in errors."""

import pytest
import yaml
from pydantic import ValidationError

from hyperplace.api import HyperNode, Job, PodGroup, format_validation_error, model_for

USER_GUIDE_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
 name: network-topology-job
 namespace: default
spec:
 schedulerName: volcano
 minAvailable: 4
 networkTopology:
   mode: hard
   highestTierAllowed: 2
 tasks:
   - name: t0
     replicas: 8
     partitionPolicy:
       totalPartitions: 2
       partitionSize: 4
       networkTopology:
         mode: hard
         highestTierAllowed: 1
     template:
       spec:
         containers:
           - name: c0
             image: nginx:latest
             resources:
               requests:
                 cpu: "4"
               limits:
                 cpu: "4"
"""


def test_user_guide_partition_job_parses_and_round_trips():
    raw = yaml.safe_load(USER_GUIDE_JOB)
    job = Job.model_validate(raw)
    assert job.spec.tasks[0].partition_policy is not None
    assert job.spec.tasks[0].partition_policy.partition_size == 4
    out = job.to_dict()
    # The pod template is carried through untouched.
    assert out["spec"]["tasks"][0]["template"] == raw["spec"]["tasks"][0]["template"]
    assert out["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}


def test_unknown_fields_survive_a_round_trip():
    raw = yaml.safe_load(USER_GUIDE_JOB)
    raw["spec"]["futureField"] = {"x": 1}
    raw["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["someNewField"] = True
    out = Job.model_validate(raw).to_dict()
    assert out["spec"]["futureField"] == {"x": 1}
    assert out["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["someNewField"] is True


def test_hypernode_errors_name_the_field():
    raw = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s0"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "Node_0"}}}]},
    }
    with pytest.raises(ValidationError) as exc:
        HyperNode.model_validate(raw)
    lines = format_validation_error(exc.value)
    assert lines and lines[0].startswith("spec.members[0].selector.exactMatch.name:")


def test_podgroup_subgroup_policy_fields():
    pg = PodGroup.model_validate(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {
                "minMember": 3,
                "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                "subGroupPolicy": [
                    {
                        "name": "task0",
                        "subGroupSize": 3,
                        "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "task0"}},
                        "matchLabelKeys": ["volcano.sh/partition-id"],
                        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                    }
                ],
            },
        }
    )
    assert pg.spec.sub_group_policy and pg.spec.sub_group_policy[0].sub_group_size == 3
    assert model_for(pg.to_dict()) is PodGroup
