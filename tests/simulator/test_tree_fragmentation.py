"""``hyperplace tree`` and the HTML picture show how much whole-domain room each tier has left."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from simulator import cli
from tests.scheduler.builders import hypernode, node, pod

FREE_PER_LEAF = [4, 3, 3, 4, 3, 3, 4, 3, 3, 4, 3, 3]  # 40 GPUs free over 12 leaves


def scattered(write) -> Path:
    """12 leaves of two 8-GPU nodes under one spine; no leaf has more than 4 GPUs free."""
    docs = []
    for leaf, free in enumerate(FREE_PER_LEAF):
        names = [f"n{leaf}-{i}" for i in range(2)]
        docs += [node(n, cpu=64, memory="512Gi", gpu=8) for n in names]
        docs.append(pod(f"busy-{leaf}-a", None, cpu=8, gpu=8 - (free + 1) // 2, node_name=names[0]))
        docs.append(pod(f"busy-{leaf}-b", None, cpu=8, gpu=8 - free // 2, node_name=names[1]))
        docs.append(hypernode(f"leaf{leaf:02d}", 1, nodes=names).to_dict())
    docs.append(hypernode("spine", 2, children=[f"leaf{i:02d}" for i in range(12)]).to_dict())
    return Path(write("c/cluster.yaml", yaml.safe_dump_all(docs)).parent)


def test_tree_json_has_per_tier_room_for_each_pod_shape(run_cli, write):
    d = scattered(write)
    res = run_cli("tree", d, "--output", "json")
    assert res.exit_code == 0, res.stderr
    frag = json.loads(res.stdout)["fragmentation"]
    assert frag["accelerator"] == "nvidia.com/gpu"
    assert list(frag["shapes"]) == ["1xnvidia.com/gpu", "4xnvidia.com/gpu", "8xnvidia.com/gpu"]
    tier1, tier2 = frag["tiers"]
    assert (tier1["tier"], tier1["hyperNodes"], tier1["freeHyperNodes"]) == (1, 12, 0)
    assert tier1["shapes"]["1xnvidia.com/gpu"]["fit"] == 40
    # 40 free GPUs, and no leaf where an 8-GPU pod fits.
    assert tier1["shapes"]["8xnvidia.com/gpu"] == {"fit": 0, "bestDomain": 0, "bestHyperNode": None}
    assert tier2["shapes"]["1xnvidia.com/gpu"] == {"fit": 40, "bestDomain": 40, "bestHyperNode": "spine"}


def test_tree_text_ends_with_the_room_left_table(run_cli, write):
    d = scattered(write)
    text = run_cli("tree", d).stdout
    table = text[text.index("Room left by tier") :]
    assert "8-gpu pods: all / best" in table
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:] if line.strip()}
    # tier, HyperNodes, entirely free, then "all / best (where)" per shape.
    assert rows["1"][:3] == ["1", "12", "0"] and rows["1"][3:6] == ["40", "/", "4"]
    assert rows["1"][-3:] == ["0", "/", "0"]


def test_shapes_are_configurable_and_bad_lists_are_refused(run_cli, write):
    d = scattered(write)
    res = run_cli("tree", d, "--output", "json", "--fragmentation-shapes", "2")
    frag = json.loads(res.stdout)["fragmentation"]
    assert list(frag["shapes"]) == ["2xnvidia.com/gpu"]
    assert frag["tiers"][0]["shapes"]["2xnvidia.com/gpu"]["fit"] == 20 - 4  # 1-GPU slots do not pair
    res = run_cli("tree", d, "--fragmentation-shapes", "two")
    assert res.exit_code == 2 and "fragmentation shapes" in res.stderr


def test_the_html_picture_has_the_same_figures(run_cli, write, tmp_path):
    d = scattered(write)
    out = tmp_path / "t.html"
    res = run_cli("simulate", d, "--html", out)
    assert res.exit_code == 0, res.stderr
    page = out.read_text()
    table = page[page.index('id="fragmentation"') :]
    table = table[: table.index("</table>")]
    assert 'data-frag-tier="1" data-free-hypernodes="0"' in table
    assert 'data-shape="8xnvidia.com/gpu" data-fit="0" data-best="0"' in table
    assert 'data-shape="1xnvidia.com/gpu" data-fit="40" data-best="40"' in table  # tier 2: the spine


def test_cli_defaults_are_the_schedulers():
    from scheduler_plugin.algorithms.fragmentation import DEFAULT_ACCELERATOR, DEFAULT_SHAPES

    assert ",".join(map(str, DEFAULT_SHAPES)) == cli.DEFAULT_SHAPES_TEXT
    assert cli.DEFAULT_ACCELERATOR == DEFAULT_ACCELERATOR
