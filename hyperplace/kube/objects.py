"""Keys and states of Kubernetes objects as every component names them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.api.constants import GROUP_NAME_ANNOTATION
from hyperplace.api.workload import pod_group_name, volcano_intent

# Pod phases after which a pod holds no room and is never scheduled again.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def namespaced_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a namespaced object, the namespace ``default`` when unset (as
    the API server defaults it; objects read from files may leave it out). An informer's key,
    which also names cluster-scoped objects, is :func:`hyperplace.runtime.api.object_key`."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def podgroup_key_of(pod: Mapping[str, Any]) -> str | None:
    """``namespace/podgroup`` a pod belongs to, or None: Volcano's group-name annotation (set by
    whoever made its Volcano PodGroup), else Kubernetes' own ``spec.schedulingGroup.podGroupName``
    (a ``scheduling.k8s.io`` PodGroup)."""
    meta = pod.get("metadata") or {}
    group = (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION) or (
        None if volcano_intent(pod) else pod_group_name(pod)  # its Volcano PodGroup is on the way
    )
    return f"{meta.get('namespace') or 'default'}/{group}" if group else None
