"""Admission as a kube-apiserver with our CRDs and webhooks performs it, without I/O.

``admit(obj, operation, old, ctx)`` runs, in the apiserver's order:

1. the mutating webhooks (``/jobs/mutate``, ``/pods/mutate``), giving a JSON patch;
2. the CRD schema and its CEL rules (the pydantic models, strictly typed, plus the
   HyperNode selector rules and the apiserver's ``metadata.name`` checks);
3. the validating webhooks (``/hypernodes/validate``, ``/jobs/validate``).

The simulator and ``hyperplace validate`` call it; the HTTP server calls the single
webhooks directly, because there the apiserver does steps 2 and around.

One deliberate difference from a real apiserver: a real one stops at the first layer
that refuses, so a schema minimum hides the webhook's message for the same field. Here
every layer runs and, where the webhook and the schema both object to one field, the
webhook's message is kept. That is what lets Volcano users see Volcano's own words
(``'TotalPartitions' must be greater than 0 in task: t0, job: j``) although our CRD
also says ``minimum: 1``, and keeps one message per problem. Schema problems on fields
the webhooks do not look at are reported as the apiserver would, in its words
(:mod:`webhooks.crd_schema` checks against the generated CRDs: unknown fields as strict
field validation refuses them, schema errors as kube-openapi words them); PodGroups and
Queues, which have no webhooks, get that check alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
from pydantic import ValidationError

from hyperplace.api import HyperNode, Job, TypedObject, format_validation_error
from hyperplace.api.constants import (
    BATCH_GROUP,
    BATCH_VERSION,
    SCHEDULING_GROUP,
    TOPOLOGY_GROUP,
    TOPOLOGY_VERSION,
)
from hyperplace.runtime.api import clone

from . import crd_schema
from .annotations import annotation_problems
from .context import AdmissionContext, Verdict, as_dict, as_list
from .hypernode import SELECTOR_EXCLUSIVE, SELECTOR_KINDS, SELECTOR_REQUIRED, validate_hypernode
from .job import job_patch, validate_job
from .names import is_dns1123_subdomain, quote_go
from .pod import pod_patch

__all__ = ["AdmissionContext", "AdmissionOutcome", "Verdict", "admit", "handled_kind", "schema_errors"]

# kind -> (group/version we serve, model)
_CRDS: dict[str, tuple[str, type[TypedObject]]] = {
    "HyperNode": (f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}", HyperNode),
    "Job": (f"{BATCH_GROUP}/{BATCH_VERSION}", Job),
}


@dataclass
class AdmissionOutcome:
    """The result of ``admit``.

    ``object`` is the object after mutation (also when refused), ``patch`` the JSON
    patch from the input to it, ``messages`` the refusals (each starting with the field
    path), ``warnings`` what an apiserver would return as warnings.
    """

    allowed: bool
    object: dict[str, Any]
    patch: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        """All refusals in one line, as an AdmissionReview status message carries them."""
        return "; ".join(self.messages)


def handled_kind(obj: Mapping[str, Any]) -> str | None:
    """``"HyperNode"``, ``"Job"`` or ``"Pod"`` when admission has webhooks for ``obj``."""
    api_version = str(obj.get("apiVersion", ""))
    kind = obj.get("kind")
    if kind == "Pod" and api_version == "v1":
        return "Pod"
    if (
        isinstance(kind, str)
        and kind in _CRDS
        and api_version.rpartition("/")[0] == _CRDS[kind][0].rpartition("/")[0]
    ):
        return kind
    return None


def _field_of(message: str) -> str:
    return message.split(": ", 1)[0] if ": " in message else ""


def _cel_selector_errors(obj: Mapping[str, Any]) -> list[str]:
    """The CRD's two ``x-kubernetes-validations`` rules on every member selector."""
    out = []
    for i, member in enumerate(as_list(as_dict(obj.get("spec")).get("members"))):
        sel = as_dict(as_dict(member).get("selector"))
        count = sum(1 for k in SELECTOR_KINDS if sel.get(k) is not None)
        path = f"spec.members[{i}].selector"
        if count == 0:
            out.append(f'{path}: Invalid value: "object": {SELECTOR_REQUIRED}')
        elif count > 1:
            out.append(f'{path}: Invalid value: "object": {SELECTOR_EXCLUSIVE}')
    return out


def schema_errors(obj: Mapping[str, Any]) -> list[str]:
    """Schema, CEL and object-name problems of a HyperNode or Job, one line per field."""
    kind = handled_kind(obj)
    if kind not in _CRDS:
        return []
    served, model = _CRDS[kind]
    out: list[str] = []
    if obj.get("apiVersion") != served:
        out.append(
            f"apiVersion: Unsupported value: {quote_go(obj.get('apiVersion'))}: supported values: {quote_go(served)}"
        )
    meta = as_dict(obj.get("metadata"))
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        out.append("metadata.name: Required value: name or generateName is required")
    elif isinstance(name, str) and name and (errs := is_dns1123_subdomain(name)):
        out.append(f"metadata.name: Invalid value: {quote_go(name)}: {'; '.join(errs)}")
    report = crd_schema.check(obj)
    if report is not None:
        # The apiserver's strict decoding and OpenAPI validation, in its words.
        out.extend(report.messages())
    if report is None or not report.errors:
        try:
            # Strict: the apiserver's structural schema refuses "3" for an integer field,
            # where pydantic's lax mode would quietly convert it. With the CRD files at hand
            # this only speaks when the model is stricter than the CRD.
            model.model_validate(obj, strict=True)
        except ValidationError as err:
            out.extend(format_validation_error(err))
    if kind == "HyperNode":
        out.extend(_cel_selector_errors(obj))
    return out


def crd_errors(obj: Mapping[str, Any]) -> list[str] | None:
    """Strict decoding and schema problems of a custom resource of ours without webhooks
    (PodGroup, Queue), as the apiserver reports them; None for other kinds."""
    if handled_kind(obj) is not None:
        return None
    report = crd_schema.check(obj)
    out = None if report is None else report.messages()
    if obj.get("kind") == "PodGroup" and str(obj.get("apiVersion", "")).startswith(f"{SCHEDULING_GROUP}/"):
        # The relax-topology annotation is honoured on PodGroups too: refuse a malformed one.
        # (Not on Kubernetes' own scheduling.k8s.io PodGroups: our webhooks do not see them.)
        out = [*(out or []), *annotation_problems(obj)]
    return out


def _merge(webhook: list[str], schema: list[str]) -> list[str]:
    """Webhook messages, then schema messages about fields no webhook message names."""
    claimed = {_field_of(m) for m in webhook if _field_of(m)}
    out = list(dict.fromkeys(webhook))
    for line in schema:
        f = _field_of(line)
        covered = any(f == c or f.startswith((c + ".", c + "[")) for c in claimed) if f else False
        if not covered and line not in out:
            out.append(line)
    return out


def admit(
    obj: dict[str, Any],
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    ctx: AdmissionContext | None = None,
) -> AdmissionOutcome:
    """Admit ``obj`` for ``operation`` (CREATE, UPDATE, DELETE or CONNECT).

    Mutating webhooks, then schema and CEL, then validating webhooks (see the module
    docstring for how their messages are combined). ``old`` is the stored object on
    UPDATE. Kinds without webhooks, and DELETE/CONNECT, pass unchanged. Never raises
    on malformed input: that is what the refusal messages are for.
    """
    kind = handled_kind(obj)
    if kind is None or operation not in ("CREATE", "UPDATE"):
        crd = crd_errors(obj) if operation in ("CREATE", "UPDATE") else None
        return AdmissionOutcome(allowed=not crd, object=clone(obj), messages=crd or [])
    patch: list[dict[str, Any]] = []
    if kind == "Pod":
        patch = pod_patch(obj, operation, ctx)
    elif kind == "Job":
        patch = job_patch(obj, operation)
    # The mutating webhooks' patches, applied as the apiserver applies them (to a copy).
    mutated: dict[str, Any] = jsonpatch.apply_patch(obj, patch)
    if kind == "Pod":
        # Core objects: the apiserver's own validation is not ours to imitate.
        return AdmissionOutcome(allowed=True, object=mutated, patch=patch)

    schema = schema_errors(mutated)
    verdict: Verdict
    if kind == "HyperNode":
        verdict = validate_hypernode(mutated, operation, old, ctx)
    else:
        verdict = validate_job(mutated, operation, old, ctx)
    messages = _merge(verdict.messages, schema)
    return AdmissionOutcome(
        allowed=not messages,
        object=mutated,
        patch=patch,
        messages=messages,
        warnings=list(dict.fromkeys(verdict.warnings)),
    )
