"""Read simulator input: files and directories of multi-document Kubernetes YAML.

Every object keeps the file and line it came from, so that admission refusals,
duplicates and malformed documents can be reported where the user has to look.
Objects stay plain wire-form dicts here; the engine turns them into models after
admission (which is what may refuse them).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from hyperplace.api.constants import DEFAULT_QUEUE, SCHEDULING_GROUP, SCHEDULING_VERSION
from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import clone

# (apiVersion group, kind) of the objects the simulator understands. Core kinds have group "".
SUPPORTED: dict[tuple[str, str], bool] = {
    # value: namespaced?
    ("", "Node"): False,
    ("", "Pod"): True,
    ("", "ConfigMap"): True,
    ("scheduling.volcano.sh", "Queue"): False,
    ("scheduling.volcano.sh", "PodGroup"): True,
    ("scheduling.k8s.io", "PriorityClass"): False,
    # Kubernetes' own gang API (1.37): the scheduler places the pods of a PodGroup; a
    # Workload's templates are read by its controllers, kept here as given.
    ("scheduling.k8s.io", "PodGroup"): True,
    ("scheduling.k8s.io", "Workload"): True,
    ("topology.volcano.sh", "HyperNode"): False,
    ("batch.volcano.sh", "Job"): True,
    # Read by the scheduler's pdb and resourcequota plugins.
    ("policy", "PodDisruptionBudget"): True,
    ("", "ResourceQuota"): True,
    # Their labels are what a pod affinity term's namespaceSelector reads.
    ("", "Namespace"): False,
    # Workloads whose pods the simulated Kubernetes controllers create (simulator.workloads).
    ("batch", "Job"): True,
    ("apps", "StatefulSet"): True,
    ("jobset.x-k8s.io", "JobSet"): True,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): True,
    ("kubeflow.org", "PyTorchJob"): True,
    # Storage the scheduler's volume filters read; claims are bound by the simulated
    # PersistentVolume controller (simulator.controllers.persistent_volumes).
    ("", "PersistentVolumeClaim"): True,
    ("", "PersistentVolume"): False,
    ("storage.k8s.io", "StorageClass"): False,
    ("storage.k8s.io", "CSINode"): False,
    ("storage.k8s.io", "CSIDriver"): False,
    ("storage.k8s.io", "CSIStorageCapacity"): True,
    # Devices the DynamicResources filter allocates; claims made from templates by the simulated
    # resourceclaim controller (simulator.controllers.resource_claims).
    ("resource.k8s.io", "DeviceClass"): False,
    ("resource.k8s.io", "ResourceSlice"): False,
    ("resource.k8s.io", "ResourceClaim"): True,
    ("resource.k8s.io", "ResourceClaimTemplate"): True,
    ("resource.k8s.io", "DeviceTaintRule"): False,
    # NVIDIA's ComputeDomain: its workload claim template is made by the simulated controller
    # (simulator.controllers.compute_domains).
    ("resource.nvidia.com", "ComputeDomain"): True,
}

# Kinds a directory written for `kubectl apply` carries that mean nothing to a simulation; skipped
# without a warning. (Namespaces are kept for their labels; every namespace is taken to exist.)
SKIPPED_SILENTLY: frozenset[tuple[str, str]] = frozenset()

# The kind key of a scheduling.k8s.io PodGroup (beside Volcano's ``PodGroup``).
UPSTREAM_PODGROUP = "PodGroup.scheduling.k8s.io"

SCHEDULER_CONF_FILES = ("scheduler.conf", "volcano-scheduler.conf")
SCHEDULER_CONF_KEY = "volcano-scheduler.conf"
CONTROLLER_CONF_KEY = "volcano-controller.conf"

# Objects without a creationTimestamp get one from a simulated clock in input order, as
# an API server would stamp them on create. Volcano orders jobs by creation time, so the
# file order is the submission order, and two runs on the same input agree.
SIM_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

# A fixed namespace for uuid5: the same kind/namespace/name always gets the same uid.
_UID_NAMESPACE = uuid.UUID("6f1c2a52-9d0e-4a8b-8a57-3c1f0d2e9b71")


class InputError(Exception):
    """Unreadable or malformed input; ``str()`` names the file and line."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source


@dataclass(frozen=True)
class Source:
    """Where an object was defined: ``file:line`` (1-based), or a live cluster."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class InputObject:
    """One object of the input, in wire form, with its origin.

    ``existing`` marks objects read from a live cluster: they already passed admission
    there, so the simulator does not run the webhooks on them again.
    """

    obj: dict[str, Any]
    source: Source
    existing: bool = False

    @property
    def kind(self) -> str:
        return kind_key(self.obj)

    @property
    def namespace(self) -> str | None:
        ns = (self.obj.get("metadata") or {}).get("namespace")
        return str(ns) if ns else None

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace or "", self.name)


@dataclass
class Inputs:
    """Everything one simulation starts from."""

    objects: list[InputObject] = field(default_factory=list)
    scheduler_conf: str | None = None  # text of volcano-scheduler.conf, when given
    scheduler_conf_source: str | None = None
    warnings: list[str] = field(default_factory=list)
    # (kind, namespace, name) -> object, to find duplicates without a quadratic scan.
    index: dict[tuple[str, str, str], InputObject] = field(default_factory=dict, repr=False)
    # kind -> its objects in input order: admission asks for one kind per arriving pod, and a
    # scan of every object each time made a 10k-node run quadratic.
    by_kind: dict[str, list[InputObject]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_kind = {}
        for o in self.objects:
            self.index.setdefault(o.ident, o)
            self.by_kind.setdefault(o.kind, []).append(o)

    def add(self, item: InputObject, *, first: bool = False) -> None:
        """Append ``item`` (or put it first), keeping the indexes; objects are added only so."""
        self.index[item.ident] = item
        same_kind = self.by_kind.setdefault(item.kind, [])
        if first:
            self.objects.insert(0, item)
            same_kind.insert(0, item)
        else:
            self.objects.append(item)
            same_kind.append(item)

    def of_kind(self, kind: str) -> list[InputObject]:
        """The objects of one kind, in input order."""
        return list(self.by_kind.get(kind, ()))


def kind_key(obj: dict[str, Any]) -> str:
    """The kind objects are keyed and listed by: the ``kind``, except ``Job.batch`` for a
    batch/v1 Job and ``PodGroup.scheduling.k8s.io`` for Kubernetes' own PodGroup, which would
    otherwise share ``Job`` and ``PodGroup`` with Volcano's."""
    kind = str(obj.get("kind", ""))
    if kind == "Job" and group_of(str(obj.get("apiVersion", ""))) == "batch":
        return "Job.batch"
    if kind == "PodGroup" and group_of(str(obj.get("apiVersion", ""))) == "scheduling.k8s.io":
        return UPSTREAM_PODGROUP
    return kind


def group_of(api_version: str) -> str:
    """``batch.volcano.sh/v1alpha1`` -> ``batch.volcano.sh``; ``v1`` -> ``""``."""
    return api_version.rpartition("/")[0]


def deterministic_uid(kind: str, namespace: str | None, name: str) -> str:
    """The uid of an object that has none: uuid5 of ``kind/namespace/name``."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace or ''}/{name}"))


def sim_time(seconds: float) -> str:
    """An RFC 3339 timestamp ``seconds`` after the simulated epoch."""
    return rfc3339(SIM_EPOCH + timedelta(seconds=seconds))


def object_label(kind: str, namespace: str | None, name: str) -> str:
    """``Kind ns/name`` or ``Kind name`` (cluster-scoped), as messages print objects."""
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Files in argument order; directories contribute their ``*.yaml``/``*.yml`` files,
    recursively, in name order, skipping hidden ones. A path that does not exist is an
    InputError."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            # Hidden files and directories (.git, .github/workflows, editor backups) are not input.
            found = [
                f
                for f in p.rglob("*")
                if f.is_file()
                and f.suffix in (".yaml", ".yml")
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            ]
            files.extend(sorted(found, key=lambda f: f.relative_to(p).as_posix()))
        elif p.is_file():
            files.append(p)
        else:
            raise InputError("no such file or directory", str(p))
    return files


def find_scheduler_conf(paths: Sequence[str | Path]) -> Path | None:
    """The ``scheduler.conf``/``volcano-scheduler.conf`` of the first directory argument holding one."""
    for p in map(Path, paths):
        if p.is_dir():
            for name in SCHEDULER_CONF_FILES:
                if (p / name).is_file():
                    return p / name
    return None


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def iter_documents(text: str, filename: str) -> Iterator[tuple[int, Any]]:
    """(1-based line, value) for each non-empty document of a YAML stream.

    compose_all + construct keeps the start line of every document; a syntax error
    becomes an InputError at the line PyYAML reports.
    """
    # The libyaml-backed loader when PyYAML has it: ~10x faster on big inputs, same marks.
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node guarantees a node
                continue
            line = node.start_mark.line + 1
            value = loader.construct_document(node)
            if value is not None:
                yield line, value
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        problem = exc.problem or exc.context or "malformed YAML"
        if exc.problem and exc.context and exc.context_mark is not None:
            # "did not find expected ',' or ']' (while parsing a flow sequence started at line 4)"
            problem += f" ({exc.context} started at line {exc.context_mark.line + 1})"
        raise InputError(f"malformed YAML: {problem}", str(Source(filename, line))) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", filename) from None
    finally:
        loader.dispose()


def _check_object(value: Any, where: Source) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(
            f"expected a Kubernetes object (a mapping with apiVersion and kind), got {type(value).__name__}",
            str(where),
        )
    for key in ("apiVersion", "kind"):
        if not isinstance(value.get(key), str) or not value.get(key):
            raise InputError(f"object has no {key}", str(where))
    meta = value.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise InputError(f"{value['kind']} has no metadata.name", str(where))
    return value


def normalize(obj: dict[str, Any], namespaced: bool) -> dict[str, Any]:
    """Fill in what an API server (or a kubelet) would: namespace, uid, Node readiness,
    the phase of a bound Pod. Returns a copy."""
    obj = clone(obj)
    meta = obj.setdefault("metadata", {})
    kind = obj["kind"]
    if namespaced:
        meta.setdefault("namespace", "default")
    else:
        meta.pop("namespace", None)
    if not meta.get("uid"):
        meta["uid"] = deterministic_uid(kind_key(obj), meta.get("namespace"), meta["name"])
    if kind == "Node":
        status = obj.setdefault("status", {})
        if not status.get("conditions"):
            status["conditions"] = [{"type": "Ready", "status": "True"}]
    elif kind == "Pod":
        spec = obj.setdefault("spec", {})
        status = obj.setdefault("status", {})
        if spec.get("nodeName"):
            status.setdefault("phase", "Running")
        else:
            status.setdefault("phase", "Pending")
    elif kind == "StorageClass":
        obj.setdefault("volumeBindingMode", "Immediate")
        obj.setdefault("reclaimPolicy", "Delete")
    elif kind in ("PersistentVolumeClaim", "PersistentVolume"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("volumeMode", "Filesystem")
        if kind == "PersistentVolume":
            spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        obj.setdefault("status", {}).setdefault("phase", "Pending")
    return obj


def _expand_list(value: dict[str, Any], where: Source) -> list[dict[str, Any]]:
    """``kind: List`` (what ``kubectl get -o yaml`` prints) holds objects in ``items``."""
    items = value.get("items") or []
    if not isinstance(items, list):
        raise InputError("List.items is not a list", str(where))
    return [_check_object(i, where) for i in items]


def load_paths(paths: Sequence[str | Path], *, default_queue: bool = True) -> Inputs:
    """Read every object of the given files and directories.

    Raises InputError for unreadable files, malformed YAML, objects without kind or
    name, and objects defined twice (naming both places).
    """
    inputs = Inputs()
    for f in expand_paths(paths):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read: {exc}", str(f)) from None
        for line, value in iter_documents(text, str(f)):
            where = Source(str(f), line)
            if isinstance(value, dict) and value.get("kind") == "List" and "items" in value:
                objs = _expand_list(value, where)
            else:
                objs = [_check_object(value, where)]
            for obj in objs:
                add_object(inputs, anchor_file_endpoints(obj, f.parent), where)
    conf = find_scheduler_conf(paths)
    if conf is not None:
        inputs.scheduler_conf = conf.read_text(encoding="utf-8")
        inputs.scheduler_conf_source = str(conf)
    finish(inputs, default_queue=default_queue)
    return inputs


def anchor_file_endpoints(obj: dict[str, Any], base: Path) -> dict[str, Any]:
    """A controller ConfigMap whose UFM discovery reads a saved answer from a relative
    ``file://ports.json`` gets it resolved against the directory of the file that defines
    the ConfigMap, so a preview works from any working directory. Other objects pass as is."""
    text = (obj.get("data") or {}).get(CONTROLLER_CONF_KEY) if obj.get("kind") == "ConfigMap" else None
    if not isinstance(text, str) or "file://" not in text:
        return obj
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return obj  # the controller's own parser reports it
    changed = False
    for entry in (doc or {}).get("networkTopologyDiscovery") or [] if isinstance(doc, dict) else []:
        cfg = entry.get("config") if isinstance(entry, dict) else None
        endpoint = cfg.get("endpoint") if isinstance(cfg, dict) else None
        if (
            isinstance(endpoint, str)
            and endpoint.startswith("file://")
            and not endpoint.startswith("file:///")
        ):
            cfg["endpoint"] = "file://" + str((base / endpoint[len("file://") :]).resolve())  # type: ignore[index]
            changed = True
    if not changed:
        return obj
    out = copy.deepcopy(obj)
    out["data"][CONTROLLER_CONF_KEY] = yaml.safe_dump(doc, sort_keys=False)
    return out


def add_object(inputs: Inputs, obj: dict[str, Any], where: Source, *, existing: bool = False) -> None:
    """Add one object (normalized); unsupported kinds are skipped with a warning."""
    key = (group_of(str(obj["apiVersion"])), str(obj["kind"]))
    if key in SKIPPED_SILENTLY:
        return
    if key not in SUPPORTED:
        inputs.warnings.append(f"{where}: {obj['apiVersion']} {obj['kind']} is not simulated; ignored")
        return
    item = InputObject(normalize(obj, SUPPORTED[key]), where, existing)
    other = inputs.index.get(item.ident)
    if other is not None:
        label = object_label(item.kind, item.namespace, item.name)
        raise InputError(f"{label} is defined twice: here and at {other.source}", str(where))
    inputs.add(item)


def finish(inputs: Inputs, *, default_queue: bool = True) -> None:
    """Add the ``default`` Queue unless given, and stamp creation times in input order."""
    if default_queue and not any(o.name == DEFAULT_QUEUE for o in inputs.of_kind("Queue")):
        queue = {
            "apiVersion": f"{SCHEDULING_GROUP}/{SCHEDULING_VERSION}",
            "kind": "Queue",
            "metadata": {"name": DEFAULT_QUEUE},
            "spec": {"weight": 1, "reclaimable": True},
            "status": {"state": "Open"},
        }
        item = InputObject(normalize(queue, False), Source("<built-in>", 0))
        inputs.add(item, first=True)
    for i, o in enumerate(inputs.objects):
        o.obj["metadata"].setdefault("creationTimestamp", sim_time(i))


def scheduler_conf_from_configmaps(objects: Iterable[InputObject]) -> tuple[str, str] | None:
    """(text, source) of ``volcano-scheduler.conf`` held by an input ConfigMap, if any."""
    for o in objects:
        if o.kind == "ConfigMap":
            data = o.obj.get("data") or {}
            if isinstance(data, dict) and isinstance(data.get(SCHEDULER_CONF_KEY), str):
                return data[SCHEDULER_CONF_KEY], str(o.source)
    return None


def controller_conf_configmap(objects: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The first ConfigMap holding Volcano's controller configuration (``volcano-controller.conf``)."""
    for o in objects:
        if isinstance((o.get("data") or {}).get(CONTROLLER_CONF_KEY), str):
            return o
    return None
