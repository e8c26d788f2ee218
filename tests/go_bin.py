"""The Go-built binaries the tests run (``hack/*-bin.sh``): where each lives, or a loud skip saying
why it cannot be had here. One mechanism for all of them: ``$HYPERPLACE_...`` when hack/test.sh
exported it, else whatever the script prints last (it builds when needed, cached afterwards). A
build that cannot run (no Go, module proxy down, no snapshot) skips the caller, never fails it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def go_built(
    script: str, what: str, env: str | None = None, cached: str = "the binaries are not cached"
) -> Path:
    """The path ``bash hack/<script>`` prints last, or ``$<env>`` when set. ``what`` opens the skip
    message; ``$<env>_ERROR`` (hack/test.sh's reason the build failed) skips at once; ``cached``
    says what is missing when Go is not installed."""
    if env is not None:
        reason = os.environ.get(f"{env}_ERROR")
        if reason:
            pytest.skip(f"{what}: hack/{script} failed: {reason}")
        got = os.environ.get(env)
        if got:
            return Path(got)
    try:
        out = subprocess.run(
            ["bash", str(REPO / "hack" / script)], capture_output=True, text=True, timeout=3600
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"{what}: hack/{script} took over an hour")
    if out.returncode != 0:
        last = "\n".join(out.stderr.strip().splitlines()[-5:])
        # The scripts need Go only to build; say which of the two stopped it.
        why = f"Go is not installed and {cached}" if shutil.which("go") is None else "the build failed"
        pytest.skip(f"{what}: {why}; hack/{script} exited {out.returncode}: {last}")
    return Path(out.stdout.strip().splitlines()[-1])
