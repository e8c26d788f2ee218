#!/usr/bin/env python3
"""The shape of Volcano's published CRDs, field by field, without their text.

Reads ``config/crd/volcano/bases/*.yaml`` of a volcano-sh/volcano checkout and prints, for the
PodGroup, Queue, Job, HyperNode and Command CRDs, everything that decides what the apiserver accepts,
defaults, prunes and shows: names, scope, version, subresources, printer columns, and every
schema node's type, format, enum, default, bounds, pattern, required list, list/map types,
int-or-string and preserve-unknown-fields markers and CEL rules. Descriptions are left out.

Two subtrees of the Job are Kubernetes' own types (``tasks[].template`` is a PodTemplateSpec,
``volumes[].volumeClaim`` a PersistentVolumeClaimSpec); they are recorded as one node each
(see TRUNCATED), since hyperplace keeps them as free-form objects.

The result is committed as ``tests/manifests/fixtures/volcano-crd-fields.json``; the tests
compare ``python hack/gen_crds.py --volcano-compatible`` against it. To refresh it::

    python hack/volcano_crd_fields.py PATH/TO/volcano > tests/manifests/fixtures/volcano-crd-fields.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

FILES = {
    "PodGroup": "scheduling.volcano.sh_podgroups.yaml",
    "Queue": "scheduling.volcano.sh_queues.yaml",
    "Job": "batch.volcano.sh_jobs.yaml",
    "HyperNode": "topology.volcano.sh_hypernodes.yaml",
    "Command": "bus.volcano.sh_commands.yaml",
}
KEYWORDS = (
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "nullable",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
)
# Subtrees recorded as one node: Kubernetes core types embedded by Volcano.
TRUNCATED = {"Job": (".spec.tasks[].template", ".spec.volumes[].volumeClaim")}


def flatten(
    node: dict[str, Any], truncate: tuple[str, ...] = (), path: str = ""
) -> dict[str, dict[str, Any]]:
    """``{path: keywords}`` for every node of a structural schema (``.a.b``, ``[]`` for items,
    ``.*`` for additionalProperties). Nodes at a ``truncate`` path are kept, their children not."""
    out: dict[str, dict[str, Any]] = {}
    info = {k: node[k] for k in KEYWORDS if k in node}
    if "anyOf" in node:
        info["anyOf"] = node["anyOf"]
    if node.get("required"):
        info["required"] = sorted(node["required"])
    if path in truncate:
        return {path or ".": {k: v for k, v in info.items() if k == "type"}}
    out[path or "."] = info
    for name, sub in sorted((node.get("properties") or {}).items()):
        out.update(flatten(sub, truncate, f"{path}.{name}"))
    if isinstance(node.get("items"), dict):
        out.update(flatten(node["items"], truncate, path + "[]"))
    if isinstance(node.get("additionalProperties"), dict):
        out.update(flatten(node["additionalProperties"], truncate, path + ".*"))
    return out


def describe(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    """The shape of one CRD document (see the module docstring)."""
    [version] = doc["spec"]["versions"]
    return {
        "group": doc["spec"]["group"],
        "names": {k: v for k, v in doc["spec"]["names"].items()},
        "scope": doc["spec"]["scope"],
        "version": version["name"],
        "subresources": version.get("subresources") or {},
        "columns": version.get("additionalPrinterColumns") or [],
        "fields": flatten(version["schema"]["openAPIV3Schema"], TRUNCATED.get(kind, ())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("volcano", type=Path, help="a volcano-sh/volcano checkout (or an export of it)")
    parser.add_argument("--commit", help="the commit, when the directory is not a git checkout")
    args = parser.parse_args(argv)
    base = args.volcano / "config" / "crd" / "volcano" / "bases"
    commit = args.commit
    try:
        commit = (
            commit
            or subprocess.run(
                ["git", "-C", str(args.volcano), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    out: dict[str, Any] = {"source": f"volcano-sh/volcano@{commit} config/crd/volcano/bases", "crds": {}}
    for kind, name in FILES.items():
        docs = [d for d in yaml.safe_load_all((base / name).read_text()) if d]
        out["crds"][kind] = describe(docs[0], kind)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
