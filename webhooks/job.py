"""Volcano Job webhooks: ``POST /jobs/mutate`` and ``POST /jobs/validate``.

Both read the raw dict, not the pydantic model, on purpose: Volcano's rules must still
report *their* messages for values our CRD schema also refuses (``totalPartitions: 0``
gives ``'TotalPartitions' must be greater than 0 in task: ...`` whatever the schema
says), and malformed input must never raise. Every refusal starts with the field path
it is about, followed by Volcano's exact text where Volcano has one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
from pydantic import ValidationError

from hyperplace.api import Job
from hyperplace.api.constants import DEFAULT_MAX_RETRY, DEFAULT_QUEUE, DEFAULT_SCHEDULER_NAME
from hyperplace.api.job import ANY_EVENT, POD_PENDING, POLICY_ACTIONS, POLICY_EVENTS
from hyperplace.api.times import parse_go_duration

from .annotations import annotation_problems
from .context import AdmissionContext, Verdict, as_dict, as_int, as_list
from .names import go_list, is_dns1123_label, is_qualified_name

SIMULTANEOUS_TIERS = (
    "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
)
UPDATE_FORBIDDEN = (
    "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec`"
)
DEFAULT_TASK_PREFIX = "default"  # Volcano's v1alpha1.DefaultTaskSpec


# --------------------------------------------------------------------------- mutation


def _task_min_available(task: dict[str, Any]) -> int:
    """Volcano's default task minAvailable (mutate_job.go, after the fix for #5401)."""
    replicas = as_int(task.get("replicas")) or 0
    pp = task.get("partitionPolicy")
    if isinstance(pp, dict):
        min_partitions = as_int(pp.get("minPartitions")) or 0
        size = as_int(pp.get("partitionSize")) or 0
        if min_partitions > 0:
            return min_partitions * size
    return replicas


def job_patch(obj: Mapping[str, Any], operation: str = "CREATE") -> list[dict[str, Any]]:
    """The ``/jobs/mutate`` webhook: the JSON patch (``add`` operations) with Volcano's
    defaults for ``obj``, which is not modified.

    On CREATE, in Volcano's order (``createPatch``): queue ``default``, schedulerName
    ``volcano``, maxRetry 3, per task (name ``default<i>``, ``dnsPolicy:
    ClusterFirstWithHostNet`` for hostNetwork pods, minAvailable, maxRetry 3), then job
    minAvailable = sum of the *defaulted* task minAvailable (Volcano mutates the tasks in
    place before summing), then the svc/ssh plugins the mpi and tensorflow plugins need.
    ``networkTopology.mode`` defaults to ``hard`` for the job and every partition, on
    CREATE and UPDATE: it is a CRD default, applied here too so that an apiserver without
    structural defaulting (and the simulator) store the same object.

    The patch is built directly rather than by diffing a mutated copy: this runs for
    every Job created, and copying plus diffing cost more than the rest of the request.
    """
    spec = obj.get("spec")
    if operation not in ("CREATE", "UPDATE") or not isinstance(spec, dict):
        return []
    ops: list[dict[str, Any]] = []

    def add(path: str, value: Any) -> None:
        # "add" also replaces a member that is present but null.
        ops.append({"op": "add", "path": path, "value": value})

    tasks = spec.get("tasks")
    nt = spec.get("networkTopology")
    if isinstance(nt, dict) and not nt.get("mode"):
        add("/spec/networkTopology/mode", "hard")
    for i, task in enumerate(as_list(tasks)):
        pnt = as_dict(as_dict(task).get("partitionPolicy")).get("networkTopology")
        if isinstance(pnt, dict) and not pnt.get("mode"):
            add(f"/spec/tasks/{i}/partitionPolicy/networkTopology/mode", "hard")
    if operation != "CREATE":
        return ops

    if not spec.get("queue"):
        add("/spec/queue", DEFAULT_QUEUE)
    if not spec.get("schedulerName"):
        add("/spec/schedulerName", DEFAULT_SCHEDULER_NAME)
    if not spec.get("maxRetry"):
        add("/spec/maxRetry", DEFAULT_MAX_RETRY)
    total = 0
    for i, task in enumerate(as_list(tasks)):
        if not isinstance(task, dict):
            continue
        base = f"/spec/tasks/{i}"
        if not task.get("name"):
            add(f"{base}/name", f"{DEFAULT_TASK_PREFIX}{i}")
        pod_spec = as_dict(task.get("template")).get("spec")
        if (
            isinstance(pod_spec, dict)
            and pod_spec.get("hostNetwork") is True
            and not pod_spec.get("dnsPolicy")
        ):
            add(f"{base}/template/spec/dnsPolicy", "ClusterFirstWithHostNet")
        min_available = task.get("minAvailable")
        if min_available is None:
            min_available = _task_min_available(task)
            add(f"{base}/minAvailable", min_available)
        if not task.get("maxRetry"):
            add(f"{base}/maxRetry", DEFAULT_MAX_RETRY)
        ma = as_int(min_available)
        total += ma if ma is not None else (as_int(task.get("replicas")) or 0)
    if not spec.get("minAvailable") and isinstance(tasks, list):
        add("/spec/minAvailable", total)
    plugins = spec.get("plugins")
    if isinstance(plugins, dict) and ("tensorflow" in plugins or "mpi" in plugins):
        if "svc" not in plugins:
            add("/spec/plugins/svc", [])
        if "mpi" in plugins and "ssh" not in plugins:
            add("/spec/plugins/ssh", [])
    return ops


def mutate_job(obj: Mapping[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    """A copy of ``obj`` with ``job_patch`` applied."""
    out: dict[str, Any] = jsonpatch.apply_patch(dict(obj), job_patch(obj, operation))
    return out


# --------------------------------------------------------------------------- validation


def _tier_of(nt: dict[str, Any], tier_names: Mapping[str, int] | None) -> tuple[int | None, str]:
    """The highest tier a networkTopology allows and the field that says so."""
    allowed = as_int(nt.get("highestTierAllowed"))
    if allowed is not None:
        return allowed, "highestTierAllowed"
    name = nt.get("highestTierName")
    if isinstance(name, str) and name and tier_names is not None and name in tier_names:
        return tier_names[name], "highestTierName"
    return None, ""


def _both_tiers(nt: dict[str, Any]) -> bool:
    return nt.get("highestTierAllowed") is not None and bool(nt.get("highestTierName"))


def _partition_chain(task: dict[str, Any], i: int, task_name: str, job_name: str) -> list[str]:
    """Volcano's else-if chain for one task's partitionPolicy, then its tier fields."""
    pp = task.get("partitionPolicy")
    if not isinstance(pp, dict):
        return []
    where = f"in task: {task_name}, job: {job_name}"
    base = f"spec.tasks[{i}]"
    total = as_int(pp.get("totalPartitions")) or 0
    size = as_int(pp.get("partitionSize")) or 0
    min_partitions = as_int(pp.get("minPartitions")) or 0
    replicas = as_int(task.get("replicas")) or 0
    min_available = as_int(task.get("minAvailable"))
    out: list[str] = []
    if total <= 0:
        out.append(
            f"{base}.partitionPolicy.totalPartitions: 'TotalPartitions' must be greater than 0 {where}"
        )
    elif size <= 0:
        out.append(f"{base}.partitionPolicy.partitionSize: 'PartitionSize' must be greater than 0 {where}")
    elif replicas != total * size:
        out.append(f"{base}.replicas: 'Replicas' are not equal to TotalPartitions*PartitionSize {where}")
    elif min_available is not None and min_partitions > 0 and min_available != min_partitions * size:
        out.append(f"{base}.minAvailable: 'MinAvailable' is not equal to MinPartitions*PartitionSize {where}")
    if _both_tiers(as_dict(pp.get("networkTopology"))):
        out.append(f"{base}.partitionPolicy.networkTopology: {SIMULTANEOUS_TIERS}")
    return out


def _valid_lists() -> str:
    return f"valid events are [{' '.join(POLICY_EVENTS)}], valid actions are [{' '.join(POLICY_ACTIONS)}]"


def _policy_problems(raw: Any, path: str, v: Verdict) -> None:
    """Volcano's ``validatePolicies`` on one list of lifecycle policies (it stops at the first
    bad policy, then checks ``*``), plus ours: an exitCode policy's action must be one too, a
    ``timeout`` must be a Go duration, and a PodPending policy without one (which never acts)
    is worth a warning."""
    events_seen: set[str] = set()
    codes_seen: set[int] = set()
    for i, item in enumerate(as_list(raw)):
        policy = as_dict(item)
        at = f"{path}[{i}]"
        event = policy.get("event")
        events = [e for e in as_list(policy.get("events")) if isinstance(e, str)]
        code = as_int(policy.get("exitCode"))
        action = policy.get("action")
        named = [*events, *([event] if isinstance(event, str) and event else [])]
        timeout = policy.get("timeout")
        if timeout is not None:
            try:
                parse_go_duration(str(timeout))
            except ValueError:
                v.messages.append(f'{at}.timeout: Invalid value: "{timeout}": not a duration (e.g. "10m")')
                return
        if named and code is not None:
            v.messages.append(f"{at}.exitCode: must not specify event and exitCode simultaneously")
            return
        if not named and code is None:
            v.messages.append(f"{at}.event: either event and exitCode should be specified")
            return
        bad_action = f'{at}.action: Invalid value: "{action or ""}": invalid policy action; {_valid_lists()}'
        if code is not None:
            if code == 0:
                v.messages.append(f"{at}.exitCode: 0 is not a valid error code")
                return
            if code in codes_seen:
                v.messages.append(f"{at}.exitCode: duplicate exitCode {code}")
                return
            codes_seen.add(code)
            if action not in POLICY_ACTIONS:  # ours: Volcano admits it, and its controller ignores it
                v.messages.append(bad_action)
                return
            continue
        field = "event" if isinstance(event, str) and event else "events"
        for name in dict.fromkeys(named):
            if name not in POLICY_EVENTS:
                v.messages.append(
                    f'{at}.{field}: Invalid value: "{name}": invalid policy event; {_valid_lists()}'
                )
                return
            if action not in POLICY_ACTIONS:
                v.messages.append(bad_action)
                return
            if name in events_seen:
                v.messages.append(f"{at}.{field}: duplicate event {name}  across different policy")
                return
            events_seen.add(name)
        if POD_PENDING in named and timeout is None:
            v.warnings.append(
                f"{at}.timeout: a PodPending policy acts only after its timeout; without one it never acts"
            )
    if ANY_EVENT in events_seen and len(events_seen) > 1:
        v.messages.append(f"{path}: if there's * here, no other policy should be here")


def _topology_checks(spec: dict[str, Any], job_name: str, ctx: AdmissionContext | None, v: Verdict) -> None:
    """Our additions: partition tier within the job's tier; tier names that exist."""
    tier_names = ctx.tier_names() if ctx is not None else None
    job_nt = as_dict(spec.get("networkTopology"))
    job_tier, job_field = _tier_of(job_nt, tier_names)
    places = [("spec.networkTopology", job_nt, "")]
    for i, raw in enumerate(as_list(spec.get("tasks"))):
        task = as_dict(raw)
        nt = as_dict(as_dict(task.get("partitionPolicy")).get("networkTopology"))
        places.append((f"spec.tasks[{i}].partitionPolicy.networkTopology", nt, str(task.get("name") or "")))
        tier, fld = _tier_of(nt, tier_names)
        if tier is not None and job_tier is not None and tier > job_tier:
            text = (
                f"spec.tasks[{i}].partitionPolicy.networkTopology.{fld}: partition tier {tier} exceeds "
                f"the job's tier {job_tier} (spec.networkTopology.{job_field}) in task: {task.get('name')}, "
                f"job: {job_name}; a partition is placed inside the job's HyperNode"
            )
            # A hard job never leaves its tier, so the partition's looser bound is a
            # contradiction; a soft job may, so there it is only worth a warning.
            (v.warnings if job_nt.get("mode") == "soft" else v.messages).append(text)
    if tier_names is None:
        return
    for path, nt, _task in places:
        name = nt.get("highestTierName")
        if isinstance(name, str) and name and name not in tier_names:
            known = ", ".join(sorted(tier_names)) or "none"
            v.warnings.append(
                f'{path}.highestTierName: no HyperNode has tierName "{name}" (known: {known}); '
                "the job cannot be placed until one does"
            )


def _queue_problem(spec: Mapping[str, Any], ctx: AdmissionContext | None) -> str | None:
    """Volcano's queue checks on Job create: the queue exists, is Open, and is a leaf (not
    ``root``, no child queues). Skipped without a queue cache. The ``default`` queue always
    exists (the scheduler makes it up when the cluster has none), and a queue the queue
    controller has not seen yet (no state) counts as Open, as for the scheduler."""
    if ctx is None or ctx.queues is None:
        return None
    name = str(spec.get("queue") or DEFAULT_QUEUE)
    queue = ctx.queues.get(name)
    if queue is None:
        if name == DEFAULT_QUEUE:
            return None
        return f'spec.queue: unable to find job queue: queues.scheduling.volcano.sh "{name}" not found'
    state = queue.status.state if queue.status is not None else None
    if state and state != "Open":
        return (
            f"spec.queue: can only submit job to queue with state `Open`, queue `{name}` status is `{state}`"
        )
    if name == "root":
        return "spec.queue: can not submit job to root queue"
    children = sum(1 for q in ctx.queues.values() if q.spec.parent == name)
    if children:
        return f"spec.queue: can only submit job to leaf queue, queue `{name}` has {children} child queues"
    return None


def _validate_create(obj: Mapping[str, Any], ctx: AdmissionContext | None) -> Verdict:
    """Volcano's ``validateJobCreate`` (network-topology rules of admit_job.go) plus ours."""
    v = Verdict()
    msgs = v.messages
    spec = as_dict(obj.get("spec"))
    job_name = str(as_dict(obj.get("metadata")).get("name") or "")
    # Volcano returns at once on these four.
    if (as_int(spec.get("minAvailable")) or 0) < 0:
        msgs.append("spec.minAvailable: job 'minAvailable' must be >= 0.")
        return v
    if (as_int(spec.get("maxRetry")) or 0) < 0:
        msgs.append("spec.maxRetry: 'maxRetry' cannot be less than zero.")
        return v
    ttl = as_int(spec.get("ttlSecondsAfterFinished"))
    if ttl is not None and ttl < 0:
        msgs.append("spec.ttlSecondsAfterFinished: 'ttlSecondsAfterFinished' cannot be less than zero.")
        return v
    tasks = spec.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        msgs.append("spec.tasks: No task specified in job spec")
        return v

    if _both_tiers(as_dict(spec.get("networkTopology"))):
        msgs.append(f"spec.networkTopology: {SIMULTANEOUS_TIERS}")
    seen: set[str] = set()
    total_replicas = 0
    for i, raw in enumerate(tasks):
        task = as_dict(raw)
        base = f"spec.tasks[{i}]"
        raw_name = task.get("name")
        name = raw_name if isinstance(raw_name, str) else ""
        replicas = as_int(task.get("replicas")) or 0
        where = f"in task: {name}, job: {job_name}"
        if replicas < 0:
            msgs.append(f"{base}.replicas: 'replicas' < 0 {where}")
        min_available = as_int(task.get("minAvailable"))
        if min_available is not None:
            if min_available < 0:
                msgs.append(f"{base}.minAvailable: 'minAvailable' < 0 {where}")
            elif min_available > replicas:
                msgs.append(f"{base}.minAvailable: 'minAvailable' is greater than 'replicas' {where}")
        total_replicas += replicas
        if errs := is_dns1123_label(name):
            msgs.append(f"{base}.name: {go_list(errs)}")
        if name in seen:
            msgs.append(f"{base}.name: duplicated task name {name}")
            break  # Volcano stops looking at tasks here
        seen.add(name)
        _policy_problems(task.get("policies"), f"{base}.policies", v)
        pod_name = f"{job_name}-{name}-{i}"
        if errs := is_qualified_name(pod_name):
            msgs.append(f"{base}.name: create pod with name {pod_name} validate failed {go_list(errs)}")
        msgs.extend(_partition_chain(task, i, name, job_name))
    if job_name and (errs := is_qualified_name(job_name)):
        msgs.append(f"metadata.name: create job with name {job_name} validate failed {go_list(errs)}")
    if total_replicas < (as_int(spec.get("minAvailable")) or 0):
        msgs.append(
            "spec.minAvailable: job 'minAvailable' should not be greater than total replicas in tasks"
        )
    _policy_problems(spec.get("policies"), "spec.policies", v)
    if problem := _queue_problem(spec, ctx):
        msgs.append(problem)
    _topology_checks(spec, job_name, ctx, v)
    return v


def _normalized_spec(obj: Mapping[str, Any]) -> Any:
    """The spec with defaults filled in, so that "absent" equals "default" (Go compares
    typed structs, where an omitted field is its zero value)."""
    try:
        return Job.model_validate(obj).to_dict().get("spec")
    except ValidationError:
        return obj.get("spec")


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if (d := _first_difference(a.get(key), b.get(key), f"{path}.{key}")) is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if (d := _first_difference(x, y, f"{path}[{i}]")) is not None:
                return d
        return None
    return None if a == b else path


def _validate_update(obj: Mapping[str, Any], old: Mapping[str, Any], ctx: AdmissionContext | None) -> Verdict:
    """Volcano's ``validateJobUpdate``: the first problem only, then our topology checks."""
    v = Verdict()
    spec = as_dict(obj.get("spec"))
    old_spec = as_dict(old.get("spec"))
    tasks = [as_dict(t) for t in as_list(spec.get("tasks"))]
    old_tasks = as_list(old_spec.get("tasks"))
    job_name = str(as_dict(obj.get("metadata")).get("name") or "")
    first: str | None = None
    total = 0
    for i, task in enumerate(tasks):
        name = task.get("name")
        replicas = as_int(task.get("replicas")) or 0
        ma = as_int(task.get("minAvailable"))
        if replicas < 0:
            first = f"spec.tasks[{i}].replicas: 'replicas' must be >= 0 in task: {name}"
        elif ma is not None and ma < 0:
            first = f"spec.tasks[{i}].minAvailable: 'minAvailable' must be >= 0 in task: {name}"
        elif ma is not None and ma > replicas:
            first = f"spec.tasks[{i}].minAvailable: 'minAvailable' must be <= 'replicas' in task: {name}"
        if first:
            break
        total += replicas
    job_min = as_int(spec.get("minAvailable")) or 0
    if first is None and job_min > total:
        first = "spec.minAvailable: job 'minAvailable' must not be greater than total replicas"
    if first is None and job_min < 0:
        first = "spec.minAvailable: job 'minAvailable' must be >= 0"
    if first is None and len(tasks) != len(old_tasks):
        first = "spec.tasks: job updates may not add or remove tasks"
    if first is None:
        for i, task in enumerate(tasks):
            if chain := _partition_chain(task, i, str(task.get("name") or ""), job_name):
                first = chain[0]
                break
    if first is None and _both_tiers(as_dict(spec.get("networkTopology"))):
        first = f"spec.networkTopology: {SIMULTANEOUS_TIERS}"
    if first is None:
        new_n, old_n = _normalized_spec(obj), _normalized_spec(old)
        if isinstance(new_n, dict) and isinstance(old_n, dict):
            new_n, old_n = copy.deepcopy(new_n), copy.deepcopy(old_n)
            # The fields Volcano lets an update change.
            for s in (new_n, old_n):
                s.pop("minAvailable", None)
                s.pop("priorityClassName", None)
                for t in as_list(s.get("tasks")):
                    if isinstance(t, dict):
                        t.pop("replicas", None)
                        t.pop("minAvailable", None)
        diff = _first_difference(new_n, old_n, "spec")
        if diff is not None:
            first = f"{diff}: {UPDATE_FORBIDDEN}"
    if first is not None:
        v.messages.append(first)
    _topology_checks(spec, job_name, ctx, v)
    return v


def validate_job(
    obj: Mapping[str, Any],
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    ctx: AdmissionContext | None = None,
) -> Verdict:
    """The ``/jobs/validate`` webhook on a raw (already mutated) Job dict.

    CREATE runs Volcano's create rules, UPDATE its update rules against ``old`` (an
    UPDATE without ``old`` is checked as a CREATE). Both add our topology rules: a
    partition's tier may not exceed the job's (a refusal; a warning for a soft job),
    and a ``highestTierName`` no known HyperNode carries is a warning (the tier may be
    discovered later); hyperplace's annotations must be well formed. Other operations are allowed.
    """
    if operation == "UPDATE" and old is not None:
        verdict = _validate_update(obj, old, ctx)
    elif operation in ("CREATE", "UPDATE"):
        verdict = _validate_create(obj, ctx)
    else:
        return Verdict()
    verdict.messages.extend(annotation_problems(obj))
    return verdict
