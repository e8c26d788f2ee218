"""A PodGroup made before its pods (the Kubeflow training operator's, with
``--gang-scheduler-name=volcano``) is admitted and says so: the operator creates the pods only once
its PodGroup is Inqueue, as Volcano's scheduler leaves it."""

from __future__ import annotations

from hyperplace.runtime.api import PODGROUPS
from tests.scheduler.builders import podgroup

from .helpers import NS, ClusterApi, eventually, running, seed_racks


async def test_a_podgroup_without_pods_yet_is_admitted_inqueue() -> None:
    api = ClusterApi()
    seed_racks(api)  # 32 cpu
    pg = podgroup("bert", 4).to_dict()
    pg["spec"]["minResources"] = {"cpu": "16"}
    pg["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "bert",
            "uid": "u1",
            "controller": True,
        }
    ]
    api.seed(PODGROUPS, pg)
    async with running(api):
        await eventually(
            lambda: ((api.peek(PODGROUPS, f"{NS}/bert") or {}).get("status") or {}).get("phase") == "Inqueue",
            what="the PodGroup Inqueue",
        )
