"""The converted Volcano cases on disk: which test files they come from, how they are written
(``hack/volcano-conformance.py``) and read (the conformance suite)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .volcano_go import Case

CASES_DIR = Path(__file__).parent / "cases"

# Volcano's test files with session tables: the actions, and the plugins whose effect a
# session shows (binds, evictions, PodGroup phases).
SOURCES = (
    "pkg/scheduler/actions/enqueue/enqueue_test.go",
    "pkg/scheduler/actions/allocate/allocate_test.go",
    "pkg/scheduler/actions/backfill/backfill_test.go",
    "pkg/scheduler/actions/preempt/preempt_test.go",
    "pkg/scheduler/actions/reclaim/reclaim_test.go",
    "pkg/scheduler/actions/gangpreempt/gangpreempt_test.go",
    "pkg/scheduler/actions/gangreclaim/gangreclaim_test.go",
    "pkg/scheduler/plugins/binpack/binpack_test.go",
    "pkg/scheduler/plugins/capacity/capacity_test.go",
    "pkg/scheduler/plugins/conformance/conformance_test.go",
    "pkg/scheduler/plugins/drf/hdrf_test.go",
    "pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go",
    "pkg/scheduler/plugins/nodegroup/nodegroup_test.go",
    "pkg/scheduler/plugins/nodeorder/nodeorder_test.go",
    "pkg/scheduler/plugins/overcommit/overcommit_test.go",
    "pkg/scheduler/plugins/pdb/pdb_test.go",
    "pkg/scheduler/plugins/predicates/predicates_test.go",
    "pkg/scheduler/plugins/priority/priority_test.go",
    "pkg/scheduler/plugins/proportion/proportion_test.go",
    "pkg/scheduler/plugins/resourcequota/resourcequota_test.go",
)


def group_of(path: str) -> str:
    """``pkg/scheduler/actions/preempt/preempt_test.go`` -> ``actions.preempt``."""
    parts = path.split("/")
    return f"{parts[2]}.{parts[3]}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60].rstrip("-") or "case"


@dataclass(frozen=True)
class StoredCase:
    """A case file as the suite reads it."""

    path: Path
    body: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def group(self) -> str:
        return self.path.parent.name


def write_cases(cases: Iterable[Case], *, ref: str, commit: str) -> int:
    """Replace ``cases/`` with one file per case; returns how many were written."""
    if CASES_DIR.exists():
        shutil.rmtree(CASES_DIR)
    counters: dict[str, int] = {}
    n = 0
    for case in cases:
        group = group_of(case.file)
        counters[group] = counters.get(group, 0) + 1
        out = (
            CASES_DIR
            / group
            / f"{counters[group]:03d}-{slug(case.test.removeprefix('Test'))}--{slug(case.name)}.yaml"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {
            "source": {
                "file": case.file,
                "test": case.test,
                "name": case.name,
                "volcano": ref,
                "commit": commit,
            },
        }
        if case.reason:
            body["not_convertible"] = case.reason
        else:
            body.update(case.data)
        note = f"# Converted from Volcano {ref} ({commit}) {case.file}, {case.test}.\n# Regenerate: python hack/volcano-conformance.py\n"
        out.write_text(note + yaml.safe_dump(body, sort_keys=False, width=120))
        n += 1
    return n


def load_cases() -> list[StoredCase]:
    """Every case file, in name order."""
    return [StoredCase(p, yaml.safe_load(p.read_text())) for p in sorted(CASES_DIR.glob("*/*.yaml"))]
