"""Mutating webhook for pods of Volcano Jobs (``POST /pods/mutate``).

A pod of a task with a ``partitionPolicy`` gets ``volcano.sh/partition-id =
task-index // partitionSize`` when it has none, so that pods created by something other
than our Job controller (an older Volcano controller, a hand-made pod) still join the
right SubJob. The partition size comes from the Job cache in the context, else from the
pod's ``volcano.sh/partition-size`` annotation; when neither knows it, the pod passes
unchanged. This webhook never refuses a pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonpatch

from hyperplace.api.constants import (
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    PARTITION_ID_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
)

from .context import AdmissionContext, as_dict

PARTITION_SIZE_ANNOTATION = "volcano.sh/partition-size"


def _lookup(meta: Mapping[str, Any], key: str) -> str | None:
    """A Volcano pod key, from labels first, then annotations (Volcano writes both)."""
    for where in ("labels", "annotations"):
        value = as_dict(meta.get(where)).get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _positive_int(text: str | None) -> int | None:
    if text is None or not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if value > 0 else None


def partition_size_for(
    pod: Mapping[str, Any], ctx: AdmissionContext | None, namespace: str | None = None
) -> int | None:
    """The partitionSize of the pod's task, or None when the task has no partitions or
    nothing tells us. ``namespace`` is the request's, for pods whose metadata has none
    yet (the apiserver fills it in after admission)."""
    meta = as_dict(pod.get("metadata"))
    job_name = _lookup(meta, JOB_NAME_KEY)
    task_name = _lookup(meta, TASK_SPEC_KEY)
    namespace = meta.get("namespace") or namespace or _lookup(meta, JOB_NAMESPACE_KEY) or "default"
    if ctx is not None and ctx.jobs is not None and job_name and task_name:
        job = ctx.jobs.get(f"{namespace}/{job_name}")
        if job is not None:
            for task in job.spec.tasks:
                if task.name == task_name:
                    pp = task.partition_policy
                    return pp.partition_size if pp is not None and pp.partition_size > 0 else None
    # A cached Job without this task, or no cache: the annotation is the fallback.
    return _positive_int(_lookup(meta, PARTITION_SIZE_ANNOTATION))


def pod_patch(
    obj: Mapping[str, Any],
    operation: str = "CREATE",
    ctx: AdmissionContext | None = None,
    namespace: str | None = None,
) -> list[dict[str, Any]]:
    """The ``/pods/mutate`` webhook: a JSON patch adding the partition-id label when it
    can be known, else ``[]``. ``obj`` is not modified."""
    if operation != "CREATE":
        return []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    labels = meta.get("labels")
    if labels is not None and not isinstance(labels, dict):
        return []  # malformed; the apiserver's own validation refuses it
    if labels and PARTITION_ID_KEY in labels:
        return []
    index = _non_negative_int(_lookup(meta, TASK_INDEX_KEY))
    if index is None:
        return []
    size = partition_size_for(obj, ctx, namespace)
    if size is None:
        return []
    # Go's integer division truncates toward zero; the index is never negative here.
    value = str(index // size)
    if labels is None:
        return [{"op": "add", "path": "/metadata/labels", "value": {PARTITION_ID_KEY: value}}]
    return [
        {
            "op": "add",
            "path": "/metadata/labels/" + PARTITION_ID_KEY.replace("~", "~0").replace("/", "~1"),
            "value": value,
        }
    ]


def mutate_pod(
    obj: Mapping[str, Any],
    operation: str = "CREATE",
    ctx: AdmissionContext | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A copy of the pod with ``pod_patch`` applied."""
    out: dict[str, Any] = jsonpatch.apply_patch(dict(obj), pod_patch(obj, operation, ctx, namespace))
    return out


def _non_negative_int(text: str | None) -> int | None:
    if text is None or not text.isascii() or not text.isdigit():
        return None
    return int(text)
