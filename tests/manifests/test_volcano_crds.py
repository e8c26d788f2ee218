"""``hack/gen_crds.py --volcano-compatible`` emits CRDs shaped exactly like Volcano's published
PodGroup, Queue, Job, HyperNode and Command CRDs, checked field by field against an extraction of
Volcano's own files (tests/manifests/fixtures/volcano-crd-fields.json, made by
hack/volcano_crd_fields.py from volcano-sh/volcano config/crd/volcano/bases)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from .kube_schema import REPO, load_gen_crds

gen = load_gen_crds()
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "volcano-crd-fields.json").read_text())
VOLCANO = FIXTURE["crds"]
SPECS = {spec.kind: spec for spec in gen.CRDS}


def _fields_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hyperplace_hack_volcano_crd_fields", REPO / "hack" / "volcano_crd_fields.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


fields = _fields_module()


def variant(kind: str) -> dict[str, Any]:
    return gen.volcano_compatible_document(SPECS[kind])


@pytest.mark.parametrize("kind", sorted(VOLCANO))
def test_the_variant_matches_volcanos_crd_field_by_field(kind: str) -> None:
    ours = fields.describe(variant(kind), kind)
    theirs = VOLCANO[kind]
    for key in ("group", "names", "scope", "version", "subresources", "columns"):
        assert ours[key] == theirs[key], key
    missing = sorted(set(theirs["fields"]) - set(ours["fields"]))
    extra = sorted(set(ours["fields"]) - set(theirs["fields"]))
    assert (missing, extra) == ([], [])
    for path, want in theirs["fields"].items():
        assert ours["fields"][path] == want, path


def test_podgroup_status_is_not_a_subresource_on_either_crd() -> None:
    # The reason status writers detect the shape: Volcano writes PodGroup status by updating
    # the whole object, and our default CRD now matches it.
    assert VOLCANO["PodGroup"]["subresources"] == {}
    assert gen.crd_document(SPECS["PodGroup"])["spec"]["versions"][0]["subresources"] == {}
    for kind in ("Job", "Queue", "HyperNode"):
        assert VOLCANO[kind]["subresources"] == {"status": {}}


def test_kubernetes_core_types_inside_the_job_stay_free_form() -> None:
    schema = variant("Job")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    task = schema["properties"]["spec"]["properties"]["tasks"]["items"]
    volume = schema["properties"]["spec"]["properties"]["volumes"]["items"]
    assert task["properties"]["template"]["x-kubernetes-preserve-unknown-fields"] is True
    assert volume["properties"]["volumeClaim"]["x-kubernetes-preserve-unknown-fields"] is True
    assert volume["required"] == ["mountPath"]


@pytest.mark.parametrize("kind", sorted(VOLCANO))
def test_every_field_our_components_write_exists_in_volcanos_crd(kind: str) -> None:
    # Written to Volcano's CRD, a field it does not declare would be pruned silently.
    ours = fields.flatten(
        gen.crd_document(SPECS[kind])["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        fields.TRUNCATED.get(kind, ()),
    )
    theirs = VOLCANO[kind]["fields"]
    # Queue.guarantee is a map of resource lists in our model, {resource: ResourceList} in
    # Volcano's: the same wire form (guarantee.resource.cpu).
    allowed = {".spec.guarantee.*", ".spec.guarantee.*.*"} if kind == "Queue" else set()
    assert sorted(set(ours) - set(theirs) - allowed) == []


def test_the_cli_prints_or_writes_the_variant(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "hack" / "gen_crds.py"), "--volcano-compatible"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert sorted(d["spec"]["names"]["kind"] for d in docs) == [
        "Command",
        "HyperNode",
        "Job",
        "PodGroup",
        "Queue",
    ]
    subprocess.run(
        [
            sys.executable,
            str(REPO / "hack" / "gen_crds.py"),
            "--volcano-compatible",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        check=True,
    )
    assert sorted(p.name for p in tmp_path.glob("*.yaml")) == sorted(gen.rendered_files())


@pytest.mark.gobuilt
def test_the_kube_apiserver_code_admits_the_variant(tmp_path: Path) -> None:
    from ..kube_bin import kube_bin_dir

    binary = kube_bin_dir() / "crdcheck"
    for spec in gen.CRDS:
        (tmp_path / spec.filename).write_text(gen.render_volcano_compatible(spec))
    objects = tmp_path / "objects.yaml"
    objects.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "pg"},
                "spec": {"minMember": 2},
                "status": {"phase": "Running", "conditions": [{"type": "Scheduled", "status": "True"}]},
            }
        )
    )
    files = [str(tmp_path / spec.filename) for spec in gen.CRDS]
    res = subprocess.run(
        [str(binary), *files, "--", str(objects)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert sum(line.startswith("OK ") for line in res.stdout.splitlines()) == len(gen.CRDS)
    assert ["VALID", "PodGroup", "pg", "pruned=[]"] in [line.split() for line in res.stdout.splitlines()], (
        res.stdout
    )
