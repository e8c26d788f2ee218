"""A newcomer's first hour: the README's set-up works on a fresh machine.

Every third-party module the code imports is a declared dependency, every module the tests import
is in the ``test`` extra (a transitive dependency that happens to be there today is not enough:
typer 0.29 dropped click), and ``hack/venv.sh`` refuses an old interpreter with a message naming
the version it found."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNTIME_DIRS = ["hyperplace", "webhooks", "controller", "scheduler_plugin", "certs", "simulator"]
TEST_DIRS = ["tests", "bench"]  # tests import bench/quality
LOCAL = {*RUNTIME_DIRS, "tests", "bench", "examples", "hack"}
# pytest plugins that are used through the configuration, not imported
PLUGINS = {"pytest-asyncio", "pytest-aiohttp", "pytest-timeout"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(reqs: list[str]) -> set[str]:
    return {_norm(re.split(r"[<>=!~\[;\s]", r, maxsplit=1)[0]) for r in reqs}


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _third_party_imports(dirs: list[str]) -> dict[str, str]:
    """Top-level module -> one file importing it, for modules outside the standard library and repo."""
    found: dict[str, str] = {}
    for d in dirs:
        for path in (REPO / d).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for n in names:
                    top = n.split(".")[0]
                    if top in sys.stdlib_module_names or top in LOCAL:
                        continue
                    if (path.parent / f"{top}.py").exists():
                        continue  # a script's sibling module (bench scripts import each other)
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


def _distributions(module: str) -> set[str]:
    return {_norm(d) for d in importlib.metadata.packages_distributions().get(module, [])}


def test_every_module_the_code_imports_is_a_declared_dependency() -> None:
    declared = _requirement_names(_project()["dependencies"])
    missing = {
        m: where
        for m, where in _third_party_imports(RUNTIME_DIRS).items()
        if not _distributions(m) & declared
    }
    assert missing == {}, f"imported but not in [project].dependencies: {missing}"


def test_every_module_the_tests_import_is_in_the_test_extra() -> None:
    project = _project()
    declared = _requirement_names(project["dependencies"]) | _requirement_names(
        project["optional-dependencies"]["test"]
    )
    missing = {
        m: where for m, where in _third_party_imports(TEST_DIRS).items() if not _distributions(m) & declared
    }
    assert missing == {}, f"imported by tests/bench but not in the test extra: {missing}"
    assert declared >= PLUGINS


def test_nothing_imports_click_directly() -> None:
    # typer >= 0.29 no longer depends on click: an import of click works only by accident.
    assert "click" not in _third_party_imports(RUNTIME_DIRS + TEST_DIRS)


def _fake_python(bin_dir: Path, name: str, version: str) -> None:
    major, minor, micro = (int(x) for x in version.split("."))
    script = bin_dir / name
    script.write_text(
        "#!/bin/sh\n"
        f'exec {sys.executable} -c "import sys; sys.version_info = ({major}, {minor}, {micro});'
        ' import platform; platform.python_version = lambda: \\"' + version + '\\";'
        ' exec(sys.argv[2]) if sys.argv[1] == \\"-c\\" else sys.exit(3)" "$@"\n'
    )
    script.chmod(0o755)


@pytest.mark.parametrize("shell_cmd", ["hp_find_python", "hp_activate"])
def test_an_old_interpreter_is_refused_naming_its_version(tmp_path: Path, shell_cmd: str) -> None:
    # A PATH whose only Python is 3.10, as on an old distribution.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_python(bin_dir, "python3", "3.10.12")
    for tool in ("rm", "cat", "cut", "sha256sum", "id", "dirname"):
        (bin_dir / tool).symlink_to(
            f"/usr/bin/{tool}" if Path(f"/usr/bin/{tool}").exists() else f"/bin/{tool}"
        )
    out = subprocess.run(
        ["/bin/bash", "-c", f". {REPO}/hack/venv.sh && {shell_cmd}"],
        capture_output=True,
        text=True,
        env={
            "PATH": str(bin_dir),
            "HOME": str(tmp_path),
            "HYPERPLACE_VENV": str(tmp_path / "venv"),
        },
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    assert "hyperplace needs Python >= 3.11; found: python3 is 3.10.12" in out.stderr
    assert not (tmp_path / "venv").exists()


def test_a_new_enough_interpreter_is_found(tmp_path: Path) -> None:
    out = subprocess.run(
        ["/bin/bash", "-c", f". {REPO}/hack/venv.sh && hp_find_python"],
        capture_output=True,
        text=True,
        env={
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "PYTHON": sys.executable,
        },
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == sys.executable
