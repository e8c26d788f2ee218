"""When a pod counts as lost with its node (controller.job.node_failure), one rule at a time: the
cases the user stories do not reach, odd and hostile Node objects among them."""

from __future__ import annotations

from typing import Any

import pytest

from controller.job.node_failure import force_delete_due, node_failure
from hyperplace.api.times import parse_rfc3339

T0 = "2026-01-01T00:00:00Z"
NOW = (parse_rfc3339(T0) or 0.0) + 100  # 100 s after T0


def pod(*, tolerations: list[Any] | None = None, phase: str = "Running", **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": "n1"}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "p", **meta}, "spec": spec, "status": {"phase": phase}}


def node(*, ready: str | None = "True", since: str | None = T0, taints: Any = None) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready, "lastTransitionTime": since}]
    return {"metadata": {"name": "n1"}, "spec": {"taints": taints}, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    "odd",
    [
        {},
        {"metadata": {"name": "n1"}, "status": "broken", "spec": ["not", "a", "map"]},
        node(ready=None),  # no Ready condition yet
        node(ready="False", since=None),  # not Ready since nobody knows when
        node(ready="False", since="yesterday"),
        node(taints="NoExecute"),
        node(taints=[None, 7, {"key": "k", "effect": "EvictEverything"}, {"effect": "NoSchedule"}]),
    ],
)
def test_a_node_the_controller_cannot_read_loses_no_pod(odd: dict[str, Any]) -> None:
    assert node_failure(pod(), odd, now=NOW).reason is None


def test_a_node_gone_loses_its_running_pod_but_not_a_finished_or_unbound_one() -> None:
    assert node_failure(pod(), None, now=NOW).reason == "node n1 is gone"
    assert node_failure(pod(phase="Succeeded"), None, now=NOW).reason is None
    unbound = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    assert node_failure(unbound, None, now=NOW).reason is None


def test_not_ready_counts_from_the_conditions_transition_and_says_when_to_look_again() -> None:
    early = node_failure(pod(), node(ready="Unknown"), now=NOW, not_ready_grace=120)
    assert (early.reason, early.wait) == (None, 20)
    late = node_failure(pod(), node(ready="Unknown"), now=NOW, not_ready_grace=60)
    assert late.reason == "node n1 Ready=Unknown for 100s"


def test_a_pod_tolerating_unreachable_for_ever_stays_but_the_default_300s_toleration_does_not_keep_it() -> (
    None
):
    forever = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]
    assert node_failure(pod(tolerations=forever), node(ready="Unknown"), now=NOW).reason is None
    default = [{**forever[0], "tolerationSeconds": 300}]
    assert node_failure(pod(tolerations=default), node(ready="Unknown"), now=NOW).reason is not None
    # Tolerating not-ready (Ready=False) is no toleration of unreachable (Ready=Unknown).
    not_ready = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]
    assert node_failure(pod(tolerations=not_ready), node(ready="False"), now=NOW).reason is None
    assert node_failure(pod(tolerations=not_ready), node(ready="Unknown"), now=NOW).reason is not None


def test_a_no_execute_taint_tolerated_for_a_while_loses_the_pod_once_that_while_passed() -> None:
    taint = {"key": "gpu", "value": "bad", "effect": "NoExecute", "timeAdded": T0}
    tolerate = [{"key": "gpu", "operator": "Equal", "value": "bad", "tolerationSeconds": 150}]
    waiting = node_failure(pod(tolerations=tolerate), node(taints=[taint]), now=NOW)
    assert (waiting.reason, waiting.wait) == (None, 50)
    tolerate[0]["tolerationSeconds"] = 60
    assert node_failure(pod(tolerations=tolerate), node(taints=[taint]), now=NOW).reason == (
        "node n1 tainted gpu=bad:NoExecute past the pod's 60s toleration"
    )
    # Another value is not tolerated at all.
    other = [{"key": "gpu", "operator": "Equal", "value": "fine"}]
    assert node_failure(pod(tolerations=other), node(taints=[taint]), now=NOW).reason == (
        "node n1 tainted gpu=bad:NoExecute"
    )


def test_a_terminating_pod_is_force_deleted_only_on_an_unreachable_node_once_past_its_deadline() -> None:
    stuck = pod(deletionTimestamp=T0)
    assert force_delete_due(stuck, node(), now=NOW, after=10).reason is None  # its kubelet is alive
    assert force_delete_due(stuck, node(ready=None), now=NOW, after=10).reason is None
    assert force_delete_due(stuck, node(ready="False"), now=NOW, after=150).wait == 50
    due = force_delete_due(stuck, None, now=NOW, after=10)
    assert due.reason == "terminating for 100s past its grace period on node n1 (gone)"
    assert force_delete_due(pod(), None, now=NOW, after=10).reason is None  # not terminating
