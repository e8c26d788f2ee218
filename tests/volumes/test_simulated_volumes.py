"""`hyperplace simulate` takes claims, volumes and classes as a cluster would: the ephemeral volume
controller makes a pod's claim, the scheduler chooses a node (and writes it on the claim), and the
PersistentVolume controller provisions and binds it there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simulator.engine import simulate
from simulator.loader import load_paths
from tests.scheduler.builders import node, pod

from .builders import claim, mounts, storage_class, volume


def write(tmp_path: Path, *objs: dict[str, Any]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path


def test_an_ephemeral_volume_is_made_provisioned_on_the_pods_node_and_bound(tmp_path: Path) -> None:
    solo = pod("solo", None, cpu=1, extra_spec=mounts(ephemeral=("scratch",)))
    del solo["metadata"]["uid"]  # the simulated API server gives it one
    solo["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] = "lvm"
    res = simulate(
        load_paths(
            [
                write(
                    tmp_path,
                    node("a", cpu=1),
                    node("b", cpu=4),
                    storage_class("lvm", provisioner="lvm.example.com"),
                    solo,
                )
            ]
        )
    )
    where = res.bindings["default/solo"]
    made = res.objects[("PersistentVolumeClaim", "default", "solo-scratch")]
    assert made["metadata"]["ownerReferences"][0]["name"] == "solo"
    assert made["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == where
    assert made["status"]["phase"] == "Bound"
    pv = res.objects[("PersistentVolume", "", made["spec"]["volumeName"])]
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0][
        "values"
    ] == [where]


def test_a_statefulset_style_gang_gets_one_local_volume_per_pod(tmp_path: Path) -> None:
    objs: list[dict[str, Any]] = [node(n, cpu=2) for n in ("a", "b", "c")]
    objs.append(storage_class("local"))
    objs += [volume(f"disk-{n}", on={"kubernetes.io/hostname": [n]}) for n in ("a", "b", "c")]
    for i in range(3):
        objs.append(claim(f"data-w-{i}"))
        p = pod(f"w-{i}", None, cpu=2, extra_spec=mounts(f"data-w-{i}"))
        del p["metadata"]["uid"]
        objs.append(p)
    for o in objs:
        o["metadata"].pop("uid", None)
    res = simulate(load_paths([write(tmp_path, *objs)]))
    assert sorted(res.bindings.values()) == ["a", "b", "c"]
    for i in range(3):
        c = res.objects[("PersistentVolumeClaim", "default", f"data-w-{i}")]
        assert c["spec"]["volumeName"] == f"disk-{res.bindings[f'default/w-{i}']}"  # on its pod's node
    assert not [w for w in res.warnings if "not simulated" in w]
