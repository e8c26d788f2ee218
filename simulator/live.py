"""Read-only snapshot of a live cluster through kubernetes-asyncio.

Only ``list`` calls are made: nodes, pods, priority classes, HyperNodes, PodGroups,
Queues, Volcano Jobs and the ConfigMaps that configure Volcano. Nothing is written.
The conversion from API responses to simulator input (:func:`inputs_from_lists`) is
separate and pure, so it is tested with recorded responses.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from .loader import CONTROLLER_CONF_KEY, SCHEDULER_CONF_KEY, InputError, Inputs, Source, add_object, finish

# (plural, group, version, kind) of the custom resources read.
CUSTOM_RESOURCES = [
    ("hypernodes", "topology.volcano.sh", "v1alpha1", "HyperNode"),
    ("queues", "scheduling.volcano.sh", "v1beta1", "Queue"),
    ("podgroups", "scheduling.volcano.sh", "v1beta1", "PodGroup"),
    ("jobs", "batch.volcano.sh", "v1alpha1", "Job"),
]
CORE_KINDS = {"nodes": ("v1", "Node"), "pods": ("v1", "Pod"), "configmaps": ("v1", "ConfigMap")}
PRIORITY_CLASS = ("scheduling.k8s.io/v1", "PriorityClass")

# Fields that only make noise in a simulation input.
_DROP_METADATA = ("managedFields", "resourceVersion", "selfLink", "generation")


def _clean(item: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """A list item in wire form with apiVersion/kind (list responses omit them per item)."""
    obj = {k: v for k, v in item.items() if v is not None}
    obj["apiVersion"] = obj.get("apiVersion") or api_version
    obj["kind"] = obj.get("kind") or kind
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if v is not None and k not in _DROP_METADATA}
    obj["metadata"] = meta
    return obj


def _is_volcano_configmap(cm: Mapping[str, Any]) -> bool:
    data = cm.get("data") or {}
    return isinstance(data, Mapping) and (SCHEDULER_CONF_KEY in data or CONTROLLER_CONF_KEY in data)


def inputs_from_lists(lists: Mapping[str, Iterable[Mapping[str, Any]]], origin: str = "cluster") -> Inputs:
    """Simulator input from list responses keyed by kind (``Node``, ``Pod``, ``HyperNode``, ...).

    Items are marked ``existing``: they already passed admission in the cluster. Pods in
    a terminal phase are dropped (they hold no resources), and only the ConfigMaps that
    carry a Volcano scheduler or controller configuration are kept.
    """
    inputs = Inputs()
    versions = {kind: av for av, kind in [*CORE_KINDS.values(), PRIORITY_CLASS]}
    versions.update({kind: f"{g}/{v}" for _, g, v, kind in CUSTOM_RESOURCES})
    for kind in ("Queue", "PriorityClass", "Node", "HyperNode", "ConfigMap", "Job", "PodGroup", "Pod"):
        for item in lists.get(kind, []):
            obj = _clean(item, versions[kind], kind)
            if kind == "Pod" and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            if kind == "ConfigMap" and not _is_volcano_configmap(obj):
                continue
            meta = obj["metadata"]
            ref = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
            add_object(inputs, obj, Source(f"{origin}:{kind}/{ref}", 0), existing=True)
    scheduler = next(
        (
            o
            for o in inputs.objects
            if o.kind == "ConfigMap" and SCHEDULER_CONF_KEY in (o.obj.get("data") or {})
        ),
        None,
    )
    if scheduler is not None:
        inputs.scheduler_conf = str(scheduler.obj["data"][SCHEDULER_CONF_KEY])
        inputs.scheduler_conf_source = str(scheduler.source)
    finish(inputs)
    return inputs


async def fetch_lists(
    kubeconfig: str | None = None, context: str | None = None
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """List every kind the simulator reads (read-only API calls); also returns warnings.

    Nodes and pods are required. The others are optional: a CRD that is not installed
    (404) means none exist, and a kind we may not list (403) is skipped with a warning,
    so a user with read access to the workload but not to Volcano's ConfigMaps still
    gets a simulation.
    """
    # lazy: only --live reads a cluster, and loads kubernetes-asyncio
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.client.exceptions import ApiException

    api_client = await config.new_client_from_config(config_file=kubeconfig, context=context)
    out: dict[str, list[dict[str, Any]]] = {}
    warnings: list[str] = []
    try:
        core = client.CoreV1Api(api_client)
        sched = client.SchedulingV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        ser = api_client.sanitize_for_serialization
        out["Node"] = [ser(n) for n in (await core.list_node()).items]
        out["Pod"] = [ser(p) for p in (await core.list_pod_for_all_namespaces()).items]

        async def optional(kind: str, call: Any) -> None:
            try:
                resp = await call()
            except ApiException as exc:
                if exc.status not in (403, 404):
                    raise
                out[kind] = []
                if exc.status == 403:
                    warnings.append(f"not allowed to list {kind} objects; simulating without them")
                return
            items = resp.get("items") if isinstance(resp, dict) else resp.items
            out[kind] = [item if isinstance(item, dict) else ser(item) for item in items or []]

        await optional("ConfigMap", core.list_config_map_for_all_namespaces)
        await optional("PriorityClass", sched.list_priority_class)
        for plural, group, version, kind in CUSTOM_RESOURCES:
            await optional(
                kind, lambda g=group, v=version, p=plural: custom.list_cluster_custom_object(g, v, p)
            )
    finally:
        await api_client.close()
    return out, warnings


def read_cluster(kubeconfig: str | None = None, context: str | None = None) -> Inputs:
    """The live cluster as simulator input; any failure becomes an InputError."""
    if kubeconfig is not None and not os.path.isfile(kubeconfig):
        raise InputError("no such kubeconfig file", kubeconfig)
    # kubernetes-asyncio logs its own (less specific) complaints; ours is the one error line.
    logging.getLogger("kubernetes_asyncio").setLevel(logging.CRITICAL)
    try:
        lists, warnings = asyncio.run(fetch_lists(kubeconfig, context))
    except InputError:
        raise
    except Exception as exc:  # config, network and API errors all mean "cannot read the input"
        where = f"cluster (context {context})" if context else "cluster"
        raise InputError(f"cannot read the live cluster: {type(exc).__name__}: {exc}", where) from None
    inputs = inputs_from_lists(lists, origin=f"cluster{':' + context if context else ''}")
    inputs.warnings.extend(warnings)
    return inputs
