"""Each topology preset's example: `hyperplace tree` shows the tree its provider's labels describe
and `hyperplace simulate` places the job inside the domain it asks for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> str:
    res = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return res.stdout


def created_hypernodes(name: str) -> dict[str, tuple[int, list[str]]]:
    out = json.loads(run("simulate", str(EXAMPLES / name), "--output", "json"))
    return {
        o["metadata"]["name"]: (
            o["spec"]["tier"],
            [m["selector"]["exactMatch"]["name"] for m in o["spec"]["members"]],
        )
        for o in out["created"]
        if o["kind"] == "HyperNode"
    }


@pytest.mark.parametrize(
    ("name", "count", "tiers"),
    [
        ("aws", 11, {1, 2, 3, 4}),
        ("gke", 11, {1, 2, 3}),
        ("nvidia-clique", 2, {1}),
        ("topograph", 9, {1, 2, 3, 4}),
    ],
)
def test_tree_previews_the_discovered_hypernodes(name: str, count: int, tiers: set[int]):
    out = run("tree", str(EXAMPLES / name))
    assert f"discovery: {count} HyperNodes created" in out
    hns = created_hypernodes(name)
    assert len(hns) == count and {t for t, _ in hns.values()} == tiers


def test_aws_example_is_a_mixed_tree():
    hns = created_hypernodes("aws")
    # p5 part: leaf (layer-3) tier 1 under layer-2 at tier 2; p6-b300 part: four tiers under the same top.
    assert hns["aws-layer3-nn-a1b2c3d4e5f6a700"] == (1, ["p5-00", "p5-01"])
    assert hns["aws-layer2-nn-7d2e0b91c4a3f8e20"][0] == 2
    assert hns["aws-layer4-nn-9a8b7c6d5e4f3a200"] == (1, ["p6-000", "p6-001"])
    assert hns["aws-layer3-nn-3e4f5a6b7c8d9e00"][0] == 2
    assert hns["aws-layer2-nn-0c9d8e7f6a5b4c3d2"][0] == 3
    assert hns["aws-layer1-nn-4f1c2a7e90b3d5a61"] == (
        4,
        ["aws-layer2-nn-0c9d8e7f6a5b4c3d2", "aws-layer2-nn-7d2e0b91c4a3f8e20"],
    )


@pytest.mark.parametrize(
    ("name", "job", "domain"),
    [
        ("aws", "p5-pair", "aws-layer3-nn-a1b2c3d4e5f6a70"),
        ("aws", "b300-quad", "aws-layer3-nn-3e4f5a6b7c8d9e0"),
        ("gke", "allreduce", "gke-subblock-"),
        ("nvidia-clique", "mnnvl", "nvl-"),
        ("topograph", "nvl", "topograph-nvl-"),
        ("topograph", "dgx", "topograph-leaf-leaf-"),
    ],
)
def test_jobs_are_placed_inside_one_domain(name: str, job: str, domain: str):
    out = json.loads(run("simulate", str(EXAMPLES / name), "--output", "json"))
    [pg] = [v for k, v in out["podgroups"].items() if k.startswith(f"default/{job}-")]
    assert pg["allocatedHyperNode"].startswith(domain)
    hns = {o["metadata"]["name"]: o for o in out["created"] if o["kind"] == "HyperNode"}

    def nodes_of(hn: str) -> set[str]:
        found: set[str] = set()
        for m in hns[hn]["spec"]["members"]:
            child = m["selector"]["exactMatch"]["name"]
            found |= {child} if m["type"] == "Node" else nodes_of(child)
        return found

    placed = {p["node"] for k, p in out["pods"].items() if k.startswith(f"default/{job}-")}
    assert None not in placed and placed <= nodes_of(pg["allocatedHyperNode"])
