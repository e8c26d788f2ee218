"""`hyperplace --help` reads like the help of the tools users know: whole summaries, PATH... and
FILE metavars rather than Python types, every default shown, and a version."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from hyperplace.runtime.flags import version
from simulator.cli import app

COMMANDS = ["simulate", "validate", "tree", "explain"]


def _help(*args: str) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    return res.output


def test_version() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"hyperplace {version()}"


def test_command_summaries_are_never_cut() -> None:
    text = _help()
    assert "..." not in text.split("Commands:")[1]
    for cmd in COMMANDS:
        assert re.search(rf"^  {cmd}\s+\S", text, re.M), cmd


@pytest.mark.parametrize("cmd", COMMANDS)
def test_no_python_types_or_markup_in_help(cmd: str) -> None:
    text = _help(cmd)
    assert not re.search(r"<(list|int|str|path|bool)[^>]*>", text), text
    assert "``" not in text and ":class:" not in text


def test_arguments_and_options_carry_user_metavars_and_defaults() -> None:
    text = _help("simulate")
    assert "PATH...  YAML files or directories" in text
    for flag in (
        "--scheduler-config FILE",
        "--cycles N",
        "--output table|json|yaml",
        "--html FILE",
        "--seed N",
    ):
        assert flag in text
    assert "[default: table]" in text and "[default: 0]" in text
    assert "FILE...  YAML files or directories to admit." in _help("validate")
    assert "NS/JOB" in _help("explain")
