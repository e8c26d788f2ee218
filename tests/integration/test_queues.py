"""Queues on a real apiserver: a queue's capability holds a second job Pending with the
reason on its PodGroup, the queue controller keeps the queue's state and PodGroup counts, and
the scheduler writes what the queue holds (``status.allocated``), as Volcano splits it."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import yaml

from hyperplace.pki import commandmark

from .components import COMMAND_KEY
from .kube import PODGROUPS, Kubectl, wait_for
from .test_end_to_end import SELECT_LABEL, Running, make_topology, running

pytestmark = pytest.mark.apiserver
__all__ = ["running"]  # the module's controller and scheduler (a fixture)


def job(
    name: str, namespace: str, queue: str, label: str, replicas: int = 2, cpu: str = "2"
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "1Gi"}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": replicas,
            "tasks": [
                {
                    "name": "t0",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "nodeSelector": {SELECT_LABEL: label},
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "x",
                                    "resources": {"requests": requests, "limits": requests},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def podgroup_of(kubectl: Kubectl, namespace: str, job_name: str) -> dict[str, Any] | None:
    for pg in kubectl.items(PODGROUPS, "-n", namespace):
        if pg["metadata"]["name"].startswith(f"{job_name}-"):
            return pg
    return None


def test_capability_holds_a_job_pending_and_the_queue_status_is_kept(
    running: Running, kubectl: Kubectl, namespace: str
) -> None:
    topo = make_topology(kubectl)  # 8 nodes of 4 cpu
    queue = f"team-{uuid.uuid4().hex[:6]}"
    kubectl.apply(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": {"weight": 1, "capability": {"cpu": "6"}},
            }
        ]
    )
    # The queue controller opens the new queue.
    wait_for(
        lambda: (kubectl.get("queues", queue).get("status") or {}).get("state") == "Open",
        f"queue {queue} Open",
        describe=running.describe,
    )
    kubectl.apply([job("first", namespace, queue, topo.label)])
    first = wait_for(
        lambda: (
            pg
            if (pg := podgroup_of(kubectl, namespace, "first"))
            and (pg.get("status") or {}).get("phase") == "Running"
            else None
        ),
        "the first job Running",
        describe=running.describe,
    )
    assert first["spec"]["queue"] == queue
    # 4 cpu held, 4 more asked: 8 > capability 6, so the second job is not admitted.
    kubectl.apply([job("second", namespace, queue, topo.label)])

    def second_pending() -> dict[str, Any] | None:
        pg = podgroup_of(kubectl, namespace, "second")
        conds = {c["type"]: c for c in ((pg or {}).get("status") or {}).get("conditions") or []}
        unsched = conds.get("Unschedulable")
        return pg if unsched and unsched.get("reason") == "NotEnqueued" else None

    second = wait_for(second_pending, "the second job held Pending", describe=running.describe)
    assert second["status"]["phase"] == "Pending"
    message = {c["type"]: c for c in second["status"]["conditions"]}["Unschedulable"]["message"]
    assert "queue resource quota insufficient: insufficient cpu" in message
    assert all(
        not p["spec"].get("nodeName")
        for p in kubectl.items("pods", "-n", namespace)
        if p["metadata"]["name"].startswith("second-")
    )

    def queue_status() -> dict[str, Any] | None:
        st = kubectl.get("queues", queue).get("status") or {}
        ok = (
            st.get("running") == 1
            and st.get("pending") == 1
            and (st.get("allocated") or {}).get("cpu") == "4"
        )
        return st if ok else None

    status = wait_for(
        queue_status,
        "queue status: counts from the controller, allocated from the scheduler",
        describe=running.describe,
    )
    assert status["state"] == "Open"


# What `vcctl queue operate --name <queue> --action close` creates (pkg/cli/queue/util.go): a
# Command in namespace default, named from generateName, owned by and targeting the Queue.
VCCTL_COMMAND = """\
apiVersion: bus.volcano.sh/v1alpha1
kind: Command
metadata:
  generateName: {queue}-{lower}-
  namespace: default
  ownerReferences:
    - apiVersion: scheduling.volcano.sh/v1beta1
      kind: Queue
      name: {queue}
      uid: {uid}
      controller: true
      blockOwnerDeletion: true
target:
  apiVersion: scheduling.volcano.sh/v1beta1
  kind: Queue
  name: {queue}
  uid: {uid}
  controller: true
  blockOwnerDeletion: true
action: {action}
"""


def test_vcctl_queue_operate_closes_and_opens_a_queue(
    running: Running, kubectl: Kubectl, namespace: str
) -> None:
    queue = f"ops-{uuid.uuid4().hex[:6]}"
    kubectl.apply(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": {"weight": 1},
            }
        ]
    )

    def state() -> str | None:
        return (kubectl.get("queues", queue).get("status") or {}).get("state")

    wait_for(lambda: state() == "Open", f"queue {queue} Open", describe=running.describe)
    uid = kubectl.get("queues", queue)["metadata"]["uid"]
    # A PodGroup still names the queue: closing it drains (Closing) rather than shuts.
    kubectl.apply(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "left-over", "namespace": namespace},
                "spec": {"minMember": 1, "queue": queue},
            }
        ]
    )

    def operate(action: str) -> None:
        cmd = yaml.safe_load(VCCTL_COMMAND.format(queue=queue, uid=uid, action=action, lower=action.lower()))
        # Marked as the admission webhook marks a Command whose creator may update the queue
        # (this module runs no webhook; test_command_admission.py does).
        cmd["metadata"]["annotations"] = {
            commandmark.ANNOTATION: commandmark.sign(COMMAND_KEY, cmd, "default", time.time())
        }
        kubectl.create([cmd])

    def commands_left() -> list[str]:
        names = [c["metadata"]["name"] for c in kubectl.items("commands", "-n", "default")]
        return [n for n in names if n.startswith(f"{queue}-")]

    operate("CloseQueue")
    wait_for(lambda: state() == "Closing", f"queue {queue} Closing", describe=running.describe)
    wait_for(lambda: commands_left() == [], "the Command deleted once served", describe=running.describe)
    kubectl.run("delete", PODGROUPS, "left-over", "-n", namespace)
    wait_for(lambda: state() == "Closed", f"queue {queue} Closed", describe=running.describe)

    operate("OpenQueue")
    wait_for(lambda: state() == "Open", f"queue {queue} Open again", describe=running.describe)
    wait_for(lambda: commands_left() == [], "the Command deleted once served", describe=running.describe)
