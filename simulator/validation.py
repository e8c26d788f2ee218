"""``hyperplace validate``: what ``kubectl apply`` of the files would be told, file by file.

Each document is checked the way a kube-apiserver with our CRDs and webhooks (and
kubectl's default strict field validation) checks it:

* a kind the API server does not serve is refused (``no matches for kind "Foo" in version
  "example.com/v1"``); built-in Kubernetes kinds pass, as do kinds of CRDs defined in the
  same input;
* our custom resources go through admission (:func:`webhooks.admission.admit`): unknown
  fields, CRD schema errors in the apiserver's words, and the webhooks' messages;
* a file that cannot be read or parsed is reported and the other files are still checked.

Every problem is reported with the file and the line of the field it names (or of the
document), so an editor can jump to it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .admission import AdmissionCaches
from .loader import (
    SUPPORTED,
    InputError,
    Inputs,
    Source,
    _Loader,
    expand_paths,
    group_of,
    load_paths,
    normalize,
)
from .store import ObjectStore, key_of

# (group, kind) -> versions a kube-apiserver 1.34 serves, for the built-in kinds people put
# in manifests next to ours. Anything else is unknown unless a CRD in the input defines it.
BUILTIN_KINDS: dict[tuple[str, str], frozenset[str]] = {
    **{
        ("", k): frozenset({"v1"})
        for k in (
            "Namespace",
            "Node",
            "Pod",
            "PodTemplate",
            "Service",
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "Endpoints",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "LimitRange",
            "ResourceQuota",
            "ReplicationController",
            "Event",
            "Binding",
        )
    },
    **{("apps", k): frozenset({"v1"}) for k in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")},
    **{("batch", k): frozenset({"v1"}) for k in ("Job", "CronJob")},
    **{
        ("rbac.authorization.k8s.io", k): frozenset({"v1"})
        for k in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    },
    **{("networking.k8s.io", k): frozenset({"v1"}) for k in ("Ingress", "IngressClass", "NetworkPolicy")},
    ("policy", "PodDisruptionBudget"): frozenset({"v1"}),
    ("scheduling.k8s.io", "PriorityClass"): frozenset({"v1"}),
    **{
        ("storage.k8s.io", k): frozenset({"v1"})
        for k in ("StorageClass", "CSIDriver", "CSINode", "VolumeAttachment")
    },
    **{
        ("admissionregistration.k8s.io", k): frozenset({"v1"})
        for k in (
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        )
    },
    ("apiextensions.k8s.io", "CustomResourceDefinition"): frozenset({"v1"}),
    ("apiregistration.k8s.io", "APIService"): frozenset({"v1"}),
    ("coordination.k8s.io", "Lease"): frozenset({"v1"}),
    ("autoscaling", "HorizontalPodAutoscaler"): frozenset({"v1", "v2"}),
    ("certificates.k8s.io", "CertificateSigningRequest"): frozenset({"v1"}),
    ("discovery.k8s.io", "EndpointSlice"): frozenset({"v1"}),
    ("node.k8s.io", "RuntimeClass"): frozenset({"v1"}),
    ("events.k8s.io", "Event"): frozenset({"v1"}),
    **{
        ("flowcontrol.apiserver.k8s.io", k): frozenset({"v1"})
        for k in ("FlowSchema", "PriorityLevelConfiguration")
    },
    **{
        ("resource.k8s.io", k): frozenset({"v1"})
        for k in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceTaintRule")
    },
}

_CLUSTER_SCOPED_BUILTIN = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "ClusterRole",
        "ClusterRoleBinding",
        "IngressClass",
        "PriorityClass",
        "StorageClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "CustomResourceDefinition",
        "APIService",
        "CertificateSigningRequest",
        "RuntimeClass",
        "FlowSchema",
        "PriorityLevelConfiguration",
        "DeviceClass",
        "ResourceSlice",
        "DeviceTaintRule",
    }
)


@dataclass
class Problem:
    """One line of ``validate`` output: where, what object, what is wrong."""

    file: str
    line: int
    text: str  # "<Kind> [ns/]name: <message>", or a message about the file

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}" if self.line else f"{self.file}: {self.text}"


@dataclass
class ValidationReport:
    """The outcome of ``hyperplace validate``."""

    accepted: int = 0
    refused: int = 0
    refusals: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    unreadable: list[Problem] = field(default_factory=list)  # files that could not be read or parsed

    def summary(self) -> str:
        """``5 objects accepted, 0 refused, 2 warnings`` (and unreadable files, if any)."""
        text = (
            f"{self.accepted} object{'s' if self.accepted != 1 else ''} accepted, {self.refused} refused, "
            f"{len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}"
        )
        if self.unreadable:
            n = len({p.file for p in self.unreadable})
            text += f", {n} file{'s' if n != 1 else ''} not readable"
        return text

    @property
    def exit_code(self) -> int:
        """2 when a file could not be read, else 1 when anything was refused, else 0."""
        return 2 if self.unreadable else 1 if self.refused else 0


@dataclass
class _Doc:
    obj: Any
    source: Source
    node: yaml.Node


def _documents(path: Path) -> Iterator[_Doc | Problem]:
    """The documents of one file with their YAML nodes (for field lines); a problem ends it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield Problem(str(path), 0, f"cannot read: {exc}")
        return
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node guarantees a node
                continue
            value = loader.construct_document(node)
            if value is not None:
                yield _Doc(value, Source(str(path), node.start_mark.line + 1), node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        yield Problem(str(path), mark.line + 1 if mark is not None else 0, f"malformed YAML: {problem}")
    except yaml.YAMLError as exc:
        yield Problem(str(path), 0, f"malformed YAML: {exc}")
    finally:
        loader.dispose()


_STEP = re.compile(r"\[(\d+)\]")


def field_line(node: yaml.Node, path: str) -> int | None:
    """The line of the field ``path`` (``spec.members[0].selector``) inside a document node,
    or of its deepest existing ancestor; None when not even the first step exists."""
    line: int | None = None
    rest = path
    while rest and node is not None:
        m = _STEP.match(rest)
        if m is not None:
            if not isinstance(node, yaml.SequenceNode) or int(m.group(1)) >= len(node.value):
                break
            node = node.value[int(m.group(1))]
            line = node.start_mark.line + 1
            rest = rest[m.end() :].removeprefix(".")
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        # Map keys may hold dots (nvidia.com/gpu): take the longest key the path starts with.
        best: tuple[yaml.Node, yaml.Node] | None = None
        for k, v in node.value:
            key = str(getattr(k, "value", ""))
            fits = rest == key or (rest.startswith(key) and rest[len(key)] in ".[")
            if fits and (best is None or len(key) > len(str(best[0].value))):
                best = (k, v)
        if best is None:
            break
        line = best[0].start_mark.line + 1
        node = best[1]
        rest = rest[len(str(best[0].value)) :].removeprefix(".")
    return line


def _field_of(message: str) -> str:
    return message.split(": ", 1)[0] if ": " in message else ""


def _label(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ref = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    return f"{obj.get('kind')} {ref}"


def _kind_problem(obj: dict[str, Any], defined: set[tuple[str, str]]) -> str | None:
    """Why the API server would not know ``obj``'s kind, or None."""
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from webhooks import crd_schema

    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    group, _, version = api_version.rpartition("/")
    served = BUILTIN_KINDS.get((group, kind))
    if served is not None and version in served:
        return None
    if (group, kind) in defined:
        return None
    ours = crd_schema.crd_kinds()
    if (group, kind) in ours and crd_schema.schema_for(api_version, kind) is not None:
        return None
    if not ours and (group, kind) in SUPPORTED:
        return None  # no CRD files to ask (an installed wheel): admission checks the version
    return f'no matches for kind "{kind}" in version "{api_version}" (ensure CRDs are installed first)'


def _check_object(value: Any) -> dict[str, Any] | str:
    if not isinstance(value, dict):
        return (
            f"expected a Kubernetes object (a mapping with apiVersion and kind), got {type(value).__name__}"
        )
    for key in ("apiVersion", "kind"):
        if not isinstance(value.get(key), str) or not value.get(key):
            return f"object has no {key}"
    meta = value.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        return f"{value['kind']} has no metadata.name"
    return value


def validate_files(files: Sequence[str | Path], old: Inputs | None = None) -> ValidationReport:
    """Check every document of ``files`` (files and directories); see the module docstring.

    Objects are admitted in input order with the HyperNodes and Jobs admitted so far (plus
    every object of ``old``) in the webhooks' caches; objects ``old`` also defines are
    admitted as UPDATE.
    """
    report = ValidationReport()
    paths: list[Path] = []
    for f in files:
        try:
            paths.extend(expand_paths([f]))
        except InputError:
            report.unreadable.append(Problem(str(f), 0, "no such file or directory"))
    docs: list[_Doc] = []
    for path in paths:
        for item in _documents(path):
            if isinstance(item, Problem):
                report.unreadable.append(item)
            else:
                docs.append(item)
    # CRDs in the input make their kinds known, as they would once applied.
    defined: set[tuple[str, str]] = set()
    for d in docs:
        if isinstance(d.obj, dict) and d.obj.get("kind") == "CustomResourceDefinition":
            spec = d.obj.get("spec") or {}
            defined.add((str(spec.get("group")), str((spec.get("names") or {}).get("kind"))))

    # The objects as an API server would hold them (the old ones, then each one accepted).
    store = ObjectStore()
    olds: dict[tuple[str, str, str], dict[str, Any]] = {}
    if old is not None:
        for io in old.objects:
            olds[key_of(io.obj)] = io.obj
            store[key_of(io.obj)] = copy.deepcopy(io.obj)
    caches = AdmissionCaches(store)
    for d in docs:
        items = d.obj.get("items") if isinstance(d.obj, dict) and d.obj.get("kind") == "List" else None
        for value in items if isinstance(items, list) else [d.obj]:
            _validate_one(store, caches, report, value, d, olds, defined)
    return report


def _validate_one(
    store: ObjectStore,
    caches: AdmissionCaches,
    report: ValidationReport,
    value: Any,
    doc: _Doc,
    olds: dict[tuple[str, str, str], dict[str, Any]],
    defined: set[tuple[str, str]],
) -> None:
    checked = _check_object(value)
    if isinstance(checked, str):
        report.refused += 1
        report.refusals.append(Problem(doc.source.file, doc.source.line, checked))
        return
    obj = checked
    problem = _kind_problem(obj, defined)
    if problem is not None:
        report.refused += 1
        report.refusals.append(Problem(doc.source.file, doc.source.line, f"{_label(obj)}: {problem}"))
        return
    group, kind = group_of(str(obj["apiVersion"])), str(obj["kind"])
    namespaced = SUPPORTED.get((group, kind), kind not in _CLUSTER_SCOPED_BUILTIN)
    obj = normalize(obj, namespaced)
    k = key_of(obj)
    prev = olds.get(k)
    if prev is not None:
        # An UPDATE keeps the identity the API server gave the object on create.
        obj["metadata"]["uid"] = prev["metadata"].get("uid", obj["metadata"]["uid"])
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from webhooks.admission import admit

    out = admit(obj, operation="UPDATE" if prev is not None else "CREATE", old=prev, ctx=caches.context())
    label = _label(obj)
    for w in dict.fromkeys(out.warnings):
        line = field_line(doc.node, _field_of(w)) or doc.source.line
        report.warnings.append(Problem(doc.source.file, line, f"{label}: {w}"))
    if not out.allowed:
        report.refused += 1
        problems = [
            Problem(doc.source.file, field_line(doc.node, _field_of(m)) or doc.source.line, f"{label}: {m}")
            for m in out.messages or ["refused by admission"]
        ]
        report.refusals.extend(sorted(problems, key=lambda p: p.line))  # in file order
        return
    report.accepted += 1
    store[k] = out.object


def load_old(paths: Sequence[str | Path]) -> Inputs:
    """The ``--old`` objects (raises InputError for unreadable input)."""
    return load_paths(paths, default_queue=False)


__all__ = ["BUILTIN_KINDS", "Problem", "ValidationReport", "field_line", "load_old", "validate_files"]
