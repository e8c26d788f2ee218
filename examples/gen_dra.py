#!/usr/bin/env python3
"""Write the Dynamic Resource Allocation example: GB200 compute trays whose GPUs are published as
ResourceSlices (as NVIDIA's DRA driver publishes them: driver ``gpu.nvidia.com``, one pool per
node), the DeviceClass the driver's chart installs, and a Volcano Job whose workers claim their
GPUs through a ResourceClaimTemplate, held to one NVLink domain.

    python examples/gen_dra.py          # rewrites examples/dra-gpus and examples/compute-domain

Output is deterministic; tests/devices pins what it gives.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DRIVER = "gpu.nvidia.com"
CLUSTER_UUID = "5b0f2c1e-7a3d-4e9b-8c6f-1d2e3f4a5b6c"


def node(name: str, clique: str) -> dict[str, Any]:
    res = {"cpu": "144", "memory": "1152Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": "NVIDIA-GB200",
                "nvidia.com/gpu.clique": clique,
            },
        },
        "status": {"allocatable": res, "capacity": dict(res)},
    }


def gpu_slice(name: str, gpus: int) -> dict[str, Any]:
    devices = []
    for i in range(gpus):
        devices.append(
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "index": {"int": i},
                    "uuid": {"string": f"GPU-{name}-{i}"},
                    "productName": {"string": "NVIDIA GB200"},
                    "architecture": {"string": "Blackwell"},
                    "driverVersion": {"version": "580.65.6"},
                },
                "capacity": {"memory": {"value": "189471Mi"}},
            }
        )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def dump(path: Path, header: str, objs: list[dict[str, Any]]) -> None:
    body = "\n---\n".join(yaml.safe_dump(o, sort_keys=False).rstrip() for o in objs)
    path.write_text(header + body + "\n")


def dra_gpus() -> None:
    out = HERE / "dra-gpus"
    out.mkdir(exist_ok=True)
    nodes, slices = [], []
    for d in range(2):
        for i in range(4):
            name = f"gb200-{d}-{i}"
            nodes.append(node(name, f"{CLUSTER_UUID}.{32766 + d}"))
            slices.append(gpu_slice(name, 4))
    dump(
        out / "00-nodes.yaml",
        "# Two NVLink domains of four GB200 compute trays, labelled with their clique by the GPU\n"
        "# Operator; no nvidia.com/gpu extended resource: the GPUs come as DRA devices.\n",
        nodes,
    )
    dump(
        out / "05-resourceslices.yaml",
        "# What NVIDIA's DRA driver publishes: one pool per node, four GPUs each.\n",
        slices,
    )
    conf = {
        "networkTopologyDiscovery": [
            {"source": "label", "enabled": True, "config": {"presets": ["nvidia-clique"]}}
        ]
    }
    dump(
        out / "10-config.yaml",
        "# Label discovery with the nvidia-clique preset (NVLink domains as tier-1 HyperNodes), and\n"
        "# the DeviceClass the driver's chart installs.\n",
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "volcano-controller-configmap", "namespace": "hyperplace-system"},
                "data": {"volcano-controller.conf": yaml.safe_dump(conf, sort_keys=False)},
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
            },
        ],
    )
    claim_spec = {
        "devices": {
            "requests": [
                {
                    "name": "gpus",
                    "exactly": {
                        "deviceClassName": DRIVER,
                        "allocationMode": "ExactCount",
                        "count": 4,
                        "selectors": [
                            {
                                "cel": {
                                    "expression": f"device.attributes['{DRIVER}'].productName == 'NVIDIA GB200'"
                                }
                            }
                        ],
                    },
                }
            ]
        }
    }
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "mnnvl", "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 4,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 4,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "example.com/nccl-tests:latest",
                                    "resources": {"requests": {"cpu": "100"}, "claims": [{"name": "gpus"}]},
                                }
                            ],
                            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-gb200"}],
                        }
                    },
                }
            ],
        },
    }
    dump(
        out / "20-job.yaml",
        "# 16 GPUs in one NVLink domain (tier 1): four workers, each claiming four GB200 GPUs\n"
        "# through a ResourceClaimTemplate; the GPUs are allocated with the gang, all or nothing.\n",
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "four-gb200", "namespace": "default"},
                "spec": {"spec": claim_spec},
            },
            job,
        ],
    )
    (out / "README.md").write_text(
        "GPUs as DRA devices (ResourceSlices of NVIDIA's driver), claimed through a ResourceClaimTemplate by a "
        "Volcano Job held to one NVLink domain: `hyperplace simulate examples/dra-gpus`.\n"
    )


def channel_slice(name: str) -> dict[str, Any]:
    """What the compute-domain kubelet plugin publishes on a node: its IMEX channel 0."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-compute-domain.nvidia.com"},
        "spec": {
            "driver": "compute-domain.nvidia.com",
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}
            ],
        },
    }


def compute_domain() -> None:
    out = HERE / "compute-domain"
    out.mkdir(exist_ok=True)
    nodes, slices = [], []
    # A small NVLink domain of 2 trays and a larger one of 4: the 4-node ComputeDomain fits only
    # the second, whole.
    for d, size in enumerate((2, 4)):
        for i in range(size):
            name = f"gb200-{d}-{i}"
            nodes.append(node(name, f"{CLUSTER_UUID}.{32766 + d}"))
            slices += [gpu_slice(name, 4), channel_slice(name)]
    dump(
        out / "00-nodes.yaml",
        "# Two NVLink domains of GB200 compute trays (2 and 4 nodes), labelled with their clique.\n",
        nodes,
    )
    dump(
        out / "05-resourceslices.yaml",
        "# What NVIDIA's DRA driver publishes: four GPUs and one IMEX channel per node.\n",
        slices,
    )
    dump(
        out / "10-classes.yaml",
        "# The DeviceClasses the driver's chart installs: GPUs and a ComputeDomain's default channel.\n",
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "compute-domain-default-channel.nvidia.com"},
                "spec": {
                    "selectors": [
                        {
                            "cel": {
                                "expression": "device.driver == 'compute-domain.nvidia.com' && "
                                "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
                                "device.attributes['compute-domain.nvidia.com'].id == 0"
                            }
                        }
                    ]
                },
            },
        ],
    )
    gpus = {
        "devices": {
            "requests": [
                {
                    "name": "gpus",
                    "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 4},
                }
            ]
        }
    }
    pod_spec = {
        "containers": [
            {
                "name": "worker",
                "image": "example.com/nvbandwidth:latest",
                "resources": {"requests": {"cpu": "100"}, "claims": [{"name": "gpus"}, {"name": "channel"}]},
            }
        ],
        "resourceClaims": [
            {"name": "gpus", "resourceClaimTemplateName": "four-gb200"},
            {"name": "channel", "resourceClaimTemplateName": "imex-channel"},
        ],
    }
    dump(
        out / "20-compute-domain.yaml",
        "# A ComputeDomain (its controller makes the channel template) and a Volcano Job of 4 workers\n"
        "# that claim 4 GPUs and the domain's IMEX channel each, with no network topology of its own:\n"
        "# the scheduler holds a ComputeDomain's pods to one NVLink clique, all or nothing.\n",
        [
            {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "ComputeDomain",
                "metadata": {"name": "imex", "namespace": "default"},
                "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "imex-channel"}}},
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "four-gb200", "namespace": "default"},
                "spec": {"spec": gpus},
            },
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "mnnvl", "namespace": "default"},
                "spec": {
                    "schedulerName": "volcano",
                    "minAvailable": 4,
                    "tasks": [{"name": "worker", "replicas": 4, "template": {"spec": pod_spec}}],
                },
            },
        ],
    )
    (out / "README.md").write_text(
        "An NVIDIA ComputeDomain (multi-node NVLink): its workers claim GPUs and the domain's IMEX channel, and "
        "are held to one NVLink clique, all or nothing: `hyperplace simulate examples/compute-domain`.\n"
    )


if __name__ == "__main__":
    dra_gpus()
    compute_domain()
    sys.exit(0)
