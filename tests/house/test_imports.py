"""The house keeps its shape: imports run downward only, checked on every change.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``): ``hyperplace`` is the floor,
the components stand on it without importing each other, the simulator and the benchmarks
on top, and nothing imports the tests; inside the scheduler, ``filters`` -> ``model | config`` -> ``algorithms | cache`` -> ``framework`` -> ``placement`` ->
``actions | plugins`` -> ``cycle`` -> ``runtime`` -> ``__main__``; inside ``hyperplace``, ``api`` ->
``pki | kube`` -> ``runtime`` -> ``localup`` (docs/architecture.md).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
# Packages whose function-level imports are checked (tests and the benchmarks are not).
CHECKED = ("hyperplace", "webhooks", "controller", "scheduler_plugin", "certs", "simulator")
# A function-level import is kept only where loading the module at import time would cost a
# caller that never needs it (kubernetes-asyncio for a process started on an in-memory API,
# numpy and the components for ``hyperplace --help``); it then says so in a comment.
LAZY_MARK = "# lazy:"


def lint_imports(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_every_import_contract_is_kept() -> None:
    got = lint_imports()
    assert got.returncode == 0, got.stdout + got.stderr
    assert "0 broken" in got.stdout


# What the plugins and the actions share, and so may import (everything else stands apart).
SHARED = {
    "plugins": {"__init__", "queue_ledger"},
    "actions": {"__init__", "jobs", "placement", "reservation", "exclusive"},
}


@pytest.mark.parametrize(
    ("package", "contract"), [("plugins", "plugins-apart"), ("actions", "actions-apart")]
)
def test_a_new_plugin_or_action_is_held_apart_from_the_others(package: str, contract: str) -> None:
    # An independence contract only covers the modules it lists: one added later must be listed.
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    (listed,) = [c["modules"] for c in config["tool"]["importlinter"]["contracts"] if c["id"] == contract]
    present = {p.stem for p in (REPO / "scheduler_plugin" / package).glob("*.py")} - SHARED[package]
    assert sorted(present) == sorted(m.rsplit(".", 1)[1] for m in listed)


def test_an_upward_import_in_the_scheduler_breaks_its_layers(tmp_path: Path) -> None:
    # A copy of the scheduler where the model imports the process on top of it.
    shutil.copytree(REPO / "scheduler_plugin", tmp_path / "scheduler_plugin")
    jobs = tmp_path / "scheduler_plugin" / "model" / "jobs.py"
    jobs.write_text(jobs.read_text() + "\nimport scheduler_plugin.runtime.scheduler  # noqa\n")
    config = tmp_path / "contracts.toml"
    config.write_text(
        """
[tool.importlinter]
root_packages = ["scheduler_plugin"]

[[tool.importlinter.contracts]]
name = "the scheduler's layers import downward only"
type = "layers"
containers = ["scheduler_plugin"]
layers = ["__main__", "runtime", "cycle", "actions | plugins", "framework", "algorithms | cache", "model | config"]
"""
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)}
    got = lint_imports(str(config), cwd=tmp_path, env=env)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "BROKEN" in got.stdout
    assert "scheduler_plugin.model.jobs -> scheduler_plugin.runtime.scheduler" in got.stdout


def function_level_imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, module, marked lazy) of every import inside a function of ``path``."""
    lines = path.read_text().splitlines()
    out: list[tuple[int, str, bool]] = []
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                name = "." * getattr(node, "level", 0) + (module or "")
                # One mark in the function, before its late imports, says why they load late.
                context = "\n".join(lines[fn.lineno - 1 : node.end_lineno])
                out.append((node.lineno, name, LAZY_MARK in context))
    return out


@pytest.mark.parametrize("package", CHECKED)
def test_a_function_imports_only_what_it_must_load_late(package: str) -> None:
    unmarked = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line, module, marked in function_level_imports(path)
        if not marked
    ]
    assert unmarked == [], "move these imports to the module's top, or say why they load late:\n" + "\n".join(
        unmarked
    )


def stray_lazy_marks(path: Path) -> list[int]:
    """Lines of ``path`` whose lazy mark stands above no import (the import it explained has
    gone, and the mark would now excuse any later import of its function)."""
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.strip().startswith(LAZY_MARK):
            continue
        below = next((x.strip() for x in lines[i + 1 :] if not x.strip().startswith("#")), "")
        if not below.startswith(("import ", "from ")):
            out.append(i + 1)
    return out


@pytest.mark.parametrize("package", CHECKED)
def test_every_lazy_mark_stands_above_the_import_it_explains(package: str) -> None:
    stray = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line in stray_lazy_marks(path)
    ]
    assert stray == [], "these marks explain no import; put them above the late import or drop them:\n" + (
        "\n".join(stray)
    )


def test_the_scheduler_loads_nothing_of_its_own_late() -> None:
    # Inside the scheduler a late import of its own modules is how an import circle hides.
    own = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sorted((REPO / "scheduler_plugin").rglob("*.py"))
        for line, module, _ in function_level_imports(path)
        if module.startswith((".", "scheduler_plugin"))
    ]
    assert own == []
