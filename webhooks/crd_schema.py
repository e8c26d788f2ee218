"""The kube-apiserver's own check of a custom resource against its CRD, offline and in its words.

A kube-apiserver (1.34) receiving one of our custom resources from ``kubectl apply``
(server-side field validation ``Strict``, kubectl's default):

1. decodes it strictly: a field the CRD's structural schema does not declare (and does not
   preserve) refuses the object with ``strict decoding error: unknown field "spec.teir"``
   (here ``spec.teir: unknown field "spec.teir"``, field first like every admission message);
   a ``null`` for a field that is not nullable is dropped silently;
2. validates it with kube-openapi against the ``openAPIV3Schema`` and turns each failure into
   a field error (``kubeOpenAPIResultToFieldErrors``), for example
   ``spec.tier: Invalid value: -1: spec.tier in body should be greater than or equal to 0``,
   ``spec.members: Invalid value: 0: spec.members in body should have at least 1 items``,
   ``spec.x.name: Invalid value: "": spec.x.name in body should be at least 1 chars long``,
   ``spec.x.name: Invalid value: "A_b": spec.x.name in body should match '^[a-z0-9]...$'``,
   ``spec.mode: Unsupported value: "medium": supported values: "hard", "soft"``,
   ``spec.tier: Required value``, ``spec.tierName: Too long: may not be more than 253 bytes``,
   ``spec.tier: Invalid value: "string": spec.tier in body must be of type integer: "string"``.

:func:`check` does both with the CRDs generated into ``manifests/crds`` (the files
``kubectl apply`` installs), so ``hyperplace validate`` and ``kubectl apply`` say the same
thing. CEL rules are not evaluated here (``webhooks.admission`` checks the HyperNode
selector rules). When the CRD files are not next to the package (an installed wheel),
:func:`check` returns None and the caller falls back to the pydantic models.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from hyperplace.kube.goregex import GoRegexError, go_regex_search

from .names import quote_go

CRD_DIR = Path(__file__).resolve().parent.parent / "manifests" / "crds"

# metav1.ObjectMeta's fields: the apiserver decodes metadata into it, so any other key there
# is an unknown field too.
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)

Schema = Mapping[str, Any]


@dataclass
class SchemaReport:
    """What the apiserver says about one object: unknown fields (strict decoding) and
    schema errors (one ``<path>: <error>`` line each)."""

    unknown: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def messages(self) -> list[str]:
        """Unknown fields first (the apiserver refuses at decoding), then schema errors; each
        starts with the field path, like every admission message."""
        return [f'{p}: unknown field "{p}"' for p in self.unknown] + list(self.errors)


@cache
def _schemas() -> dict[tuple[str, str], dict[str, Schema]]:
    """(group, kind) -> {version: openAPIV3Schema} of every CRD in :data:`CRD_DIR`."""
    out: dict[tuple[str, str], dict[str, Schema]] = {}
    if not CRD_DIR.is_dir():
        return out
    for f in sorted(CRD_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text(encoding="utf-8")):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc.get("spec") or {}
            key = (str(spec.get("group")), str((spec.get("names") or {}).get("kind")))
            for v in spec.get("versions") or []:
                schema = ((v.get("schema") or {}).get("openAPIV3Schema")) or {}
                out.setdefault(key, {})[str(v.get("name"))] = schema
    return out


def crd_kinds() -> frozenset[tuple[str, str]]:
    """(group, kind) of every CRD the schemas were read for (empty without the files)."""
    return frozenset(_schemas())


def schema_for(api_version: str, kind: str) -> Schema | None:
    """The openAPIV3Schema of ``kind`` at ``api_version`` (``group/version``), or None."""
    group, _, version = api_version.rpartition("/")
    return (_schemas().get((group, kind)) or {}).get(version)


def check(obj: Mapping[str, Any]) -> SchemaReport | None:
    """Strict decoding and schema validation of ``obj`` as the apiserver does it, or None
    when no CRD schema for its apiVersion/kind is available."""
    schema = schema_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if schema is None:
        return None
    report = SchemaReport()
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        report.unknown.extend(f"metadata.{k}" for k in meta if k not in OBJECT_META_FIELDS)
    body = dict(obj)
    status = body.pop("status", None)
    _walk(schema, body, "", report, top=True)
    status_schema = (schema.get("properties") or {}).get("status")
    if status is not None and isinstance(status_schema, Mapping):
        # Our CRDs have the status subresource: create and update of the object itself reset
        # its status before validating, so only strict decoding looks at it.
        decoded = SchemaReport()
        _walk(status_schema, status, "status", decoded)
        report.unknown.extend(decoded.unknown)
    return report


# --- kube-openapi, the parts our CRDs use --------------------------------------------------------


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null"


def _types(schema: Schema) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    t = schema.get("type")
    return [str(t)] if t else []


def _type_ok(allowed: list[str], value: Any) -> bool:
    actual = _json_type(value)
    if not allowed or actual in allowed:
        return True
    if actual == "integer" and "number" in allowed:
        return True
    # A JSON number with an integral value (2.0) is an integer to kube-openapi.
    return actual == "number" and "integer" in allowed and math.isfinite(value) and float(value).is_integer()


def _num(value: float) -> str:
    """A number as Go's %v prints it (2.0 -> 2)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _walk(schema: Schema, value: Any, path: str, report: SchemaReport, *, top: bool = False) -> None:
    errors = report.errors
    allowed = _types(schema)
    if not _type_ok(allowed, value):
        actual = _json_type(value)
        errors.append(
            f'{path}: Invalid value: "{actual}": {path} in body must be of type {",".join(allowed)}: "{actual}"'
        )
        return
    if isinstance(value, str):
        n = len(value)
        if "maxLength" in schema and n > int(schema["maxLength"]):
            limit = int(schema["maxLength"])
            errors.append(f"{path}: Too long: may not be more than {limit} byte{'s' if limit != 1 else ''}")
        elif "minLength" in schema and n < int(schema["minLength"]):
            errors.append(
                f"{path}: Invalid value: {quote_go(value)}: {path} in body should be at least "
                f"{int(schema['minLength'])} chars long"
            )
        elif "pattern" in schema and not _matches(str(schema["pattern"]), value):
            errors.append(
                f"{path}: Invalid value: {quote_go(value)}: {path} in body should match '{schema['pattern']}'"
            )
    elif isinstance(value, int | float) and not isinstance(value, bool):
        shown = _num(value)
        if "minimum" in schema:
            low = schema["minimum"]
            exclusive = bool(schema.get("exclusiveMinimum"))
            if value < low or (exclusive and value == low):
                what = "greater than" if exclusive else "greater than or equal to"
                errors.append(f"{path}: Invalid value: {shown}: {path} in body should be {what} {_num(low)}")
        if "maximum" in schema:
            high = schema["maximum"]
            exclusive = bool(schema.get("exclusiveMaximum"))
            if value > high or (exclusive and value == high):
                what = "less than" if exclusive else "less than or equal to"
                errors.append(f"{path}: Invalid value: {shown}: {path} in body should be {what} {_num(high)}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < int(schema["minItems"]):
            errors.append(
                f"{path}: Invalid value: {len(value)}: {path} in body should have at least "
                f"{int(schema['minItems'])} items"
            )
        if "maxItems" in schema and len(value) > int(schema["maxItems"]):
            limit = int(schema["maxItems"])
            errors.append(
                f"{path}: Too many: {len(value)}: must have at most {limit} item{'s' if limit != 1 else ''}"
            )
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                if item is None and not items.get("nullable"):
                    continue
                _walk(items, item, f"{path}[{i}]", report)
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(
            json.dumps(v if isinstance(v, str) else json.dumps(v), ensure_ascii=False) for v in schema["enum"]
        )
        errors.append(f"{path}: Unsupported value: {quote_go(value)}: supported values: {supported}")
    if isinstance(value, Mapping):
        _walk_object(schema, value, path, report, top=top)


def _walk_object(
    schema: Schema, value: Mapping[str, Any], path: str, report: SchemaReport, *, top: bool
) -> None:
    props: Mapping[str, Schema] | None = schema.get("properties")
    extra = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    for req in schema.get("required") or []:
        sub = (props or {}).get(req) or {}
        if value.get(req) is None and "default" not in sub:
            report.errors.append(f"{_join(path, req)}: Required value")
    for key, sub_value in value.items():
        sub_path = _join(path, str(key))
        if top and key in ("apiVersion", "kind", "metadata"):
            continue  # checked by the apiserver's own code (and by our callers)
        if props is not None and key in props:
            sub_schema: Schema | None = props[key]
        elif isinstance(extra, Mapping):
            sub_schema = extra
        else:
            sub_schema = None
        if sub_schema is None:
            if not preserve:  # pruned; strict field validation refuses it
                report.unknown.append(sub_path)
            continue
        if sub_value is None and not sub_schema.get("nullable"):
            continue  # the apiserver drops it before validating
        _walk(sub_schema, sub_value, sub_path, report)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _matches(pattern: str, value: str) -> bool:
    try:
        return go_regex_search(pattern, value)
    except GoRegexError:
        return False
