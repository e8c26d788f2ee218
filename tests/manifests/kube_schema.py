"""Validate objects against a CRD's openAPIV3Schema the way a kube-apiserver would, offline.

Kubernetes validation = structural pruning (unknown fields and nulls dropped) + OpenAPI v3.0
keywords (JSON Schema draft 4 semantics: boolean ``exclusiveMinimum``) + CEL
``x-kubernetes-validations``. There is no CEL library here, so the CEL rules the CRDs carry are
mapped to Python predicates by their exact text; a rule nobody taught this module fails loudly
instead of passing silently.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "manifests" / "crds"

CRD_FILES = {
    "HyperNode": "topology.volcano.sh_hypernodes.yaml",
    "Job": "batch.volcano.sh_jobs.yaml",
    "PodGroup": "scheduling.volcano.sh_podgroups.yaml",
    "Queue": "scheduling.volcano.sh_queues.yaml",
    "Command": "bus.volcano.sh_commands.yaml",
}


def _has(obj: dict[str, Any], *keys: str) -> int:
    return sum(1 for k in keys if k in obj)


SELECTOR_KEYS = ("exactMatch", "regexMatch", "labelMatch")
CEL_RULES: dict[str, Callable[[Any], bool]] = {
    "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)": lambda s: (
        _has(s, *SELECTOR_KEYS) >= 1
    ),
    "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) <= 1": (
        lambda s: _has(s, *SELECTOR_KEYS) <= 1
    ),
}


class UnknownCELRule(AssertionError):
    """A CRD carries a CEL rule this module cannot evaluate: add it to CEL_RULES (and a test)."""


def _cel(
    validator: Any, rules: list[dict[str, Any]], instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    for rule in rules:
        fn = CEL_RULES.get(rule["rule"])
        if fn is None:
            raise UnknownCELRule(rule["rule"])
        if not fn(instance):
            yield jsonschema.ValidationError(rule.get("message") or f"failed rule: {rule['rule']}")


KubeValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator, validators={"x-kubernetes-validations": _cel}
)


def load_gen_crds() -> ModuleType:
    """hack/gen_crds.py as a module (hack/ is not a package)."""
    name = "hyperplace_hack_gen_crds"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "hack" / "gen_crds.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@cache
def _crd(kind: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((CRD_DIR / CRD_FILES[kind]).read_text()) if d]
    assert len(docs) == 1
    return docs[0]


def crd(kind: str) -> dict[str, Any]:
    """The committed CRD document for ``kind`` (a copy)."""
    return copy.deepcopy(_crd(kind))


def openapi(kind: str) -> dict[str, Any]:
    return crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def prune(schema: dict[str, Any], value: Any, path: str = "") -> tuple[Any, list[str]]:
    """Structural pruning: drop fields the schema does not declare (unless it preserves unknown
    fields) and nulls of non-nullable fields. Returns the pruned copy and the dropped field paths
    (nulls are dropped silently, as the apiserver does)."""
    dropped: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        out: dict[str, Any] = {}
        for key, sub in value.items():
            sub_path = f"{path}.{key}" if path else key
            sub_schema = (props or {}).get(key) if props is not None else extra
            if sub is None and not (sub_schema or {}).get("nullable"):
                continue
            if sub_schema is None:
                if preserve or (props is None and extra is None):
                    out[key] = sub
                else:
                    dropped.append(sub_path)
                continue
            out[key], more = prune(sub_schema, sub, sub_path)
            dropped.extend(more)
        return out, dropped
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = []
        for i, item in enumerate(value):
            pruned, more = prune(schema["items"], item, f"{path}[{i}]")
            items.append(pruned)
            dropped.extend(more)
        return items, dropped
    return value, dropped


def errors(kind: str, obj: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(validation messages as ``path: message``, pruned unknown fields) for ``obj``."""
    schema = openapi(kind)
    pruned, dropped = prune(schema, obj)
    messages = []
    for err in sorted(KubeValidator(schema).iter_errors(pruned), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in err.absolute_path)
        messages.append(f"{where}: {err.message}")
    return messages, dropped
