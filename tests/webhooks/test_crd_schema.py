"""Our offline check of custom resources against the generated CRDs says what the apiserver says:
the unknown fields strict field validation refuses, and kube-openapi's words for schema errors."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhooks.crd_schema import CRD_DIR, check

HN: dict[str, Any] = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "rack0"},
    "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n"}}}]},
}


def _hn(name: str, **spec: Any) -> dict[str, Any]:
    obj = copy.deepcopy(HN)
    obj["metadata"]["name"] = name
    obj["spec"].update(spec)
    return obj


CASES: list[dict[str, Any]] = [
    _hn("typo", teir=1),
    _hn("negative", tier=-1),
    _hn("text-tier", tier="1"),
    _hn("no-members", members=[]),
    _hn("switch", members=[{"type": "Switch", "selector": {"exactMatch": {"name": "n0"}}}]),
    _hn("empty-name", members=[{"type": "Node", "selector": {"exactMatch": {"name": ""}}}]),
    _hn("bad-name", members=[{"type": "Node", "selector": {"exactMatch": {"name": "A_b"}}, "extra": 1}]),
    _hn("long-tier-name", tierName="x" * 254),
    {**_hn("no-tier"), "spec": {"members": HN["spec"]["members"]}},
    {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "job"},
        "spec": {
            "networkTopology": {"mode": "medium"},
            "tasks": [
                {
                    "name": "t0",
                    "replicas": 2,
                    "partitionPolicy": {"totalPartitions": 0},
                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                }
            ],
        },
    },
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"minMember": -1, "minResources": {"memory": "4 cores"}, "queue": True},
    },
]


def test_strict_field_validation_names_every_unknown_field() -> None:
    report = check(_hn("typo", teir=1, members=[{**HN["spec"]["members"][0], "weight": 2}]))
    assert report is not None
    assert sorted(report.messages()) == [
        'spec.members[0].weight: unknown field "spec.members[0].weight"',
        'spec.teir: unknown field "spec.teir"',
    ]
    meta = check({**HN, "metadata": {"name": "x", "lables": {}}})
    assert meta is not None and meta.unknown == ["metadata.lables"]


def test_a_number_where_text_belongs_is_named_as_the_apiserver_decodes_it() -> None:
    # The apiserver decodes JSON integers as int64 ("integer"); crdcheck reads YAML into
    # float64, so this case is pinned here rather than compared with it.
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg"}}
    report = check({**pg, "spec": {"minMember": 1, "queue": 3}})
    assert report is not None and report.errors == [
        'spec.queue: Invalid value: "integer": spec.queue in body must be of type string: "integer"'
    ]


def test_status_is_only_decoded_as_the_status_subresource_resets_it() -> None:
    report = check({**HN, "status": {"nodeCount": -1, "nodeCuont": 1}})
    assert report is not None
    assert report.unknown == ["status.nodeCuont"] and report.errors == []


@pytest.mark.gobuilt
def test_the_apiservers_own_validation_code_agrees(tmp_path: Path) -> None:
    """The same objects through k8s.io/apiextensions-apiserver (hack/kube-bin.sh builds crdcheck)."""
    from ..kube_bin import kube_bin_dir

    binary = kube_bin_dir() / "crdcheck"
    objects = tmp_path / "objects.yaml"
    objects.write_text("\n---\n".join(yaml.safe_dump(o) for o in CASES))
    out = subprocess.run(
        [str(binary), *map(str, sorted(CRD_DIR.glob("*.yaml"))), "--", str(objects)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    theirs: dict[str, tuple[list[str], set[str]]] = {}
    name = ""
    for line in out.stdout.splitlines():
        if line.startswith(("VALID", "INVALID")):
            _, _, name, pruned = line.split(maxsplit=3)
            unknown = pruned.removeprefix("pruned=[").removesuffix("]").split()
            theirs[name] = (unknown, set())
        elif line.startswith("    "):
            theirs[name][1].add(line.strip().removeprefix("[]."))
    assert set(theirs) == {o["metadata"]["name"] for o in CASES}
    for obj in CASES:
        ours = check(obj)
        assert ours is not None
        unknown, errors = theirs[obj["metadata"]["name"]]
        assert ours.unknown == unknown, obj["metadata"]["name"]
        assert set(ours.errors) == errors, obj["metadata"]["name"]
