#!/usr/bin/env python3
"""Write the topology-preset examples: nodes labelled the way each provider labels them, the
controller ConfigMap selecting the preset, and a job.

    python examples/gen_presets.py          # rewrites examples/{aws,gke,nvidia-clique,topograph}

No HyperNode is given in any of them: label discovery builds them from the preset. Output is
deterministic; tests/examples pins the trees it gives.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent


def node(name: str, gpus: int, cpu: int, labels: dict[str, str]) -> dict[str, Any]:
    res = {"cpu": str(cpu), "memory": f"{cpu * 8}Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": res, "capacity": dict(res)},
    }


def config(presets: list[str]) -> dict[str, Any]:
    conf = {
        "networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {"presets": presets}}]
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-controller-configmap", "namespace": "hyperplace-system"},
        "data": {"volcano-controller.conf": yaml.safe_dump(conf, sort_keys=False)},
    }


def job(
    name: str,
    replicas: int,
    gpus: int,
    cpu: int,
    topology: dict[str, Any],
    selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    res = {"cpu": str(cpu), "nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "worker",
                "image": "example.com/nccl-tests:latest",
                "resources": {"requests": res, "limits": res},
            }
        ]
    }
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": replicas,
            "networkTopology": {"mode": "hard", **topology},
            "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": spec}}],
        },
    }


def write(directory: str, docs: dict[str, tuple[str, list[dict[str, Any]]]], readme: str) -> None:
    out = HERE / directory
    out.mkdir(exist_ok=True)
    for file, (comment, objs) in docs.items():
        text = "".join(f"# {line}\n" for line in comment.splitlines())
        text += yaml.safe_dump_all(objs, sort_keys=False, explicit_start=False)
        (out / file).write_text(text)
    (out / "README.md").write_text(readme.strip() + "\n")


def aws() -> None:
    """A mixed tree: p5 nodes report three network layers, p6-b300 nodes four."""
    layer = "topology.k8s.aws/network-node-layer-"
    nodes = []
    for leaf in range(2):  # three layers: layer-3 is the bottom
        for i in range(2):
            nodes.append(
                node(
                    f"p5-{leaf}{i}",
                    8,
                    192,
                    {
                        "node.kubernetes.io/instance-type": "p5.48xlarge",
                        "topology.k8s.aws/zone-id": "usw2-az2",
                        layer + "1": "nn-4f1c2a7e90b3d5a61",
                        layer + "2": "nn-7d2e0b91c4a3f8e20",
                        layer + "3": f"nn-a1b2c3d4e5f6a70{leaf}",
                    },
                )
            )
    for mid in range(2):  # four layers: layer-4 is the bottom, layer-3 one above
        for leaf in range(2):
            for i in range(2):
                nodes.append(
                    node(
                        f"p6-{mid}{leaf}{i}",
                        8,
                        192,
                        {
                            "node.kubernetes.io/instance-type": "p6-b300.48xlarge",
                            "topology.k8s.aws/zone-id": "usw2-az2",
                            layer + "1": "nn-4f1c2a7e90b3d5a61",
                            layer + "2": "nn-0c9d8e7f6a5b4c3d2",
                            layer + "3": f"nn-3e4f5a6b7c8d9e0{mid}",
                            layer + "4": f"nn-9a8b7c6d5e4f3a2{mid}{leaf}",
                        },
                    )
                )
    write(
        "aws",
        {
            "00-nodes.yaml": (
                "4 p5.48xlarge nodes (three network layers) and 8 p6-b300.48xlarge nodes (four layers)\n"
                "under one layer-1 network node, labelled as EKS labels them.",
                nodes,
            ),
            "10-discovery-config.yaml": ("Label discovery with the aws preset.", [config(["aws"])]),
            "20-jobs.yaml": (
                "Tier 1 is the network node closest to the instance in both parts (layer-3 on p5,\n"
                "layer-4 on p6-b300): each job fits in one domain of the tier it names.",
                [
                    job(
                        "p5-pair",
                        2,
                        8,
                        96,
                        {"highestTierAllowed": 1},
                        {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                    ),
                    job(
                        "b300-quad",
                        4,
                        8,
                        96,
                        {"highestTierAllowed": 2},
                        {"node.kubernetes.io/instance-type": "p6-b300.48xlarge"},
                    ),
                ],
            ),
        },
        "A mixed tree from EKS network-topology labels (aws preset): p5 nodes give three tiers, p6-b300 nodes four, "
        "under one top network node: `hyperplace simulate examples/aws`.",
    )


def gke() -> None:
    key = "cloud.google.com/gce-topology-"
    nodes = []
    for sub in range(2):
        for host in range(4):
            nodes.append(
                node(
                    f"a4-{sub}{host}",
                    8,
                    224,
                    {
                        "cloud.google.com/gke-accelerator": "nvidia-b200",
                        key + "block": "3f8a1c0e5b7d9e2a",
                        key + "subblock": f"b4c2e1d0a9f8e7d{sub}",
                        key + "host": f"9e8d7c6b5a4f3e2{sub}{host}",
                    },
                )
            )
    write(
        "gke",
        {
            "00-nodes.yaml": (
                "8 A4 nodes in one block of two sub-blocks, labelled as GKE labels reserved VMs.",
                nodes,
            ),
            "10-discovery-config.yaml": ("Label discovery with the gke preset.", [config(["gke"])]),
            "20-job.yaml": (
                "4 whole nodes within one sub-block (tier 2, named by its label key).",
                [job("allreduce", 4, 8, 200, {"highestTierName": key + "subblock"})],
            ),
        },
        "HyperNodes from GKE's physical topology labels (gke preset: host, sub-block, block), then a job held to "
        "one sub-block: `hyperplace simulate examples/gke`.",
    )


def nvidia_clique() -> None:
    nodes = []
    for domain, uuid in enumerate(
        ("5b0f2c1e-7a3d-4e9b-8c6f-1d2e3f4a5b6c", "a7e3d9c1-2b4f-4a6e-9d8c-7f6e5d4c3b2a")
    ):
        for tray in range(4):
            nodes.append(
                node(
                    f"gb200-{domain}-{tray}",
                    4,
                    144,
                    {"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/gpu.clique": f"{uuid}.32766"},
                )
            )
    nodes.append(node("h100-0", 8, 192, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}))
    write(
        "nvidia-clique",
        {
            "00-nodes.yaml": (
                "Two NVLink domains of four GB200 compute trays (4 GPUs each), labelled by the GPU Operator\n"
                "with nvidia.com/gpu.clique = <ClusterUUID>.<CliqueID>, and one H100 node without one.",
                nodes,
            ),
            "10-discovery-config.yaml": (
                "Label discovery with the nvidia-clique preset.",
                [config(["nvidia-clique"])],
            ),
            "20-job.yaml": (
                "16 GPUs in one NVLink domain (tier 1).",
                [
                    job(
                        "mnnvl",
                        4,
                        4,
                        100,
                        {"highestTierAllowed": 1},
                        {"nvidia.com/gpu.product": "NVIDIA-GB200"},
                    )
                ],
            ),
        },
        "NVLink domains (nvidia.com/gpu.clique) as tier-1 HyperNodes (nvidia-clique preset), then a job held to one "
        "domain: `hyperplace simulate examples/nvidia-clique`.",
    )


def topograph() -> None:
    key = "network.topology.nvidia.com/"
    nodes = []
    for rack in range(2):  # GB200 racks: NVLink domain under a leaf (four tiers)
        for tray in range(2):
            labels = {
                "nvidia.com/gpu.count": "4",
                key + "leaf": f"leaf-{rack}",
                key + "spine": "spine-0",
                key + "core": "core-0",
            }
            if rack == 0:
                labels[key + "accelerator"] = f"nvl-{rack}"
            else:  # the GPU Operator's label is present: Topograph leaves accelerator unset
                labels["nvidia.com/gpu.clique"] = "a7e3d9c1-2b4f-4a6e-9d8c-7f6e5d4c3b2a.1"
            nodes.append(node(f"gb200-{rack}-{tray}", 4, 144, labels))
    for leaf in range(2, 4):  # DGX H100 without multi-node NVLink: leaf is tier 1 (three tiers)
        for i in range(2):
            nodes.append(
                node(
                    f"dgx-{leaf}-{i}",
                    8,
                    192,
                    {
                        "nvidia.com/gpu.count": "8",
                        key + "leaf": f"leaf-{leaf}",
                        key + "spine": "spine-1",
                        key + "core": "core-0",
                    },
                )
            )
    write(
        "topograph",
        {
            "00-nodes.yaml": (
                "GB200 trays (NVLink domain, leaf, spine, core: four tiers) and DGX H100 nodes (leaf, spine,\n"
                "core: three tiers) on one core, labelled as NVIDIA Topograph labels them.",
                nodes,
            ),
            "10-discovery-config.yaml": (
                "Label discovery with the topograph preset.",
                [config(["topograph"])],
            ),
            "20-jobs.yaml": (
                "One job per part, each within the tier closest to its nodes.",
                [
                    job("nvl", 2, 4, 100, {"highestTierAllowed": 1}, {"nvidia.com/gpu.count": "4"}),
                    job("dgx", 2, 8, 150, {"highestTierAllowed": 1}, {"nvidia.com/gpu.count": "8"}),
                ],
            ),
        },
        "A mixed tree from NVIDIA Topograph's labels (topograph preset): NVLink racks give four tiers, DGX nodes "
        "three: `hyperplace simulate examples/topograph`.",
    )


def main() -> int:
    aws()
    gke()
    nvidia_clique()
    topograph()
    return 0


if __name__ == "__main__":
    sys.exit(main())
