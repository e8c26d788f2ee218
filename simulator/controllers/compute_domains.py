"""Adapter standing in for NVIDIA's ComputeDomain controller (``k8s-dra-driver-gpu``): a
ComputeDomain (``resource.nvidia.com/v1beta1``) gets, in its namespace, the workload
ResourceClaimTemplate its ``spec.channel.resourceClaimTemplate.name`` names, claiming one IMEX
channel of the ``compute-domain-default-channel.nvidia.com`` class configured with the domain's
UID, labelled as the driver labels it. The IMEX daemons the driver then starts on each node are
not simulated (they run beside the workload and take no device a gang asks for)."""

from __future__ import annotations

from typing import Any

from ..cluster import Cluster

KIND = "ComputeDomain"
TEMPLATE = "ResourceClaimTemplate"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
DRIVER = "compute-domain.nvidia.com"


def workload_template(cd: dict[str, Any]) -> dict[str, Any] | None:
    """The workload claim template of a ComputeDomain, as its controller writes it (None when
    the domain names none)."""
    meta = cd.get("metadata") or {}
    channel = (cd.get("spec") or {}).get("channel") or {}
    name = (channel.get("resourceClaimTemplate") or {}).get("name")
    if not name:
        return None
    uid = str(meta.get("uid") or "")
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": TEMPLATE,
        "metadata": {
            "name": str(name),
            "namespace": str(meta.get("namespace") or "default"),
            "labels": {
                "resource.nvidia.com/computeDomain": uid,
                "resource.nvidia.com/computeDomainTarget": "Workload",
            },
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                    "config": [
                        {
                            "requests": ["channel"],
                            "opaque": {
                                "driver": DRIVER,
                                "parameters": {
                                    "apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "ComputeDomainChannelConfig",
                                    "domainID": uid,
                                    "allocationMode": str(channel.get("allocationMode") or "Single"),
                                },
                            },
                        }
                    ],
                }
            }
        },
    }


class ComputeDomains:
    """The ComputeDomain controller, over every ComputeDomain."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it made a template."""
        c = self.cluster
        changed = False
        for cd in c.of_kind(KIND):
            body = workload_template(cd)
            if body is None:
                continue
            m = body["metadata"]
            if (TEMPLATE, m["namespace"], m["name"]) in c.objects:
                continue
            c.create(body, "compute-domain-controller", admit=False)
            changed = True
        return changed
