"""Helpers for the CLI tests: run ``hyperplace`` in-process and write YAML inputs."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from simulator.cli import app


@pytest.fixture
def run_cli() -> Callable[..., Result]:
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
        return p

    return _write


NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}}}
status:
  allocatable: {{cpu: "{cpu}", memory: 8Gi, pods: "110"}}
"""


def nodes_yaml(names: list[str], cpu: int = 4) -> str:
    return "---".join(NODE.format(name=n, cpu=cpu) for n in names)


def hypernode_yaml(name: str, tier: int, members: list[str], kind: str = "Node") -> str:
    lines = [
        "apiVersion: topology.volcano.sh/v1alpha1",
        "kind: HyperNode",
        f"metadata: {{name: {name}}}",
        "spec:",
        f"  tier: {tier}",
        "  members:",
    ]
    for m in members:
        lines.append(f"  - {{type: {kind}, selector: {{exactMatch: {{name: {m}}}}}}}")
    return "\n".join(lines) + "\n"


def default_queue_holding_after(wait: str) -> str:
    """The ``default`` Queue, annotated to hold room for a gang that has waited ``wait`` (the
    scheduler's own default is two hours)."""
    return (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"
        f"metadata: {{name: default, annotations: {{hyperplace.io/reservation-wait: {wait}}}}}\n"
        "spec: {weight: 1, reclaimable: true}\n"
    )
