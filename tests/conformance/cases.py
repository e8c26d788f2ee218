"""The converted Volcano cases on disk: which test files they come from, how they are written
(``hack/volcano-conformance.py``) and read (the conformance suite)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .volcano_go import Case, GoSource, convert_file

# Where the Volcano snapshot is kept on the development machines, and the release converted.
VOLCANO_REPO = "/work/.mirror/volcano-sh+volcano/repo"
VOLCANO_REF = "v1.15.1"

CASES_DIR = Path(__file__).parent / "cases"
# Per Volcano test file, its test functions that hold no session table (they check a function
# of the action or plugin directly): not cases, listed in docs/volcano-differences.md.
TABLELESS = CASES_DIR / "tableless.yaml"

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


def git_source(repo: str, ref: str) -> tuple[GoSource, str]:
    """The Go files of ``ref`` in the git directory ``repo`` (bare or not), and its commit."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout

    commit = git("rev-parse", f"{ref}^{{commit}}").strip()
    return GoSource(
        lambda path: git("show", f"{commit}:{path}"),
        lambda path: git("ls-tree", "--name-only", f"{commit}:{path}").split(),
    ), commit


def convert_all(source: GoSource, tableless: dict[str, list[str]] | None = None) -> list[Case]:
    """Every case of the files in :data:`SOURCES`, in order; per file, the test functions
    with no session table go to ``tableless``."""
    out: list[Case] = []
    for path in SOURCES:
        names: list[str] = []
        out.extend(convert_file(source, path, names))
        if tableless is not None and names:
            tableless[path] = names
    return out


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


def render_cases(
    cases: Iterable[Case], *, ref: str, commit: str, tableless: dict[str, list[str]] | None = None
) -> dict[Path, str]:
    """One file per case (its path under ``cases/`` and its text), and ``tableless.yaml``."""
    counters: dict[str, int] = {}
    out: dict[Path, str] = {
        TABLELESS.relative_to(
            CASES_DIR
        ): f"# Test functions of Volcano {ref} ({commit}) with no session table.\n"
        + yaml.safe_dump(tableless or {}, sort_keys=False, width=120)
    }
    for case in cases:
        group = group_of(case.file)
        counters[group] = counters.get(group, 0) + 1
        name = f"{counters[group]:03d}-{slug(case.test.removeprefix('Test'))}--{slug(case.name)}.yaml"
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
        note = (
            f"# Converted from Volcano {ref} ({commit}) {case.file}, {case.test}.\n"
            "# Regenerate: python hack/volcano-conformance.py\n"
        )
        out[Path(group) / name] = note + yaml.safe_dump(body, sort_keys=False, width=120)
    return out


def write_cases(
    cases: Iterable[Case], *, ref: str, commit: str, tableless: dict[str, list[str]] | None = None
) -> int:
    """Replace ``cases/`` with one file per case and ``tableless.yaml``; returns how many files
    were written."""
    files = render_cases(cases, ref=ref, commit=commit, tableless=tableless)
    if CASES_DIR.exists():
        shutil.rmtree(CASES_DIR)
    for rel, text in files.items():
        (CASES_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
        (CASES_DIR / rel).write_text(text)
    return len(files)


def load_tableless() -> dict[str, list[str]]:
    """``tableless.yaml``: per Volcano test file, its test functions with no session table."""
    return yaml.safe_load(TABLELESS.read_text()) or {} if TABLELESS.exists() else {}


def load_cases() -> list[StoredCase]:
    """Every case file, in name order."""
    return [StoredCase(p, yaml.safe_load(p.read_text())) for p in sorted(CASES_DIR.glob("*/*.yaml"))]
