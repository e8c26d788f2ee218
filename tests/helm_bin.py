"""Where the Go-built helm lives (``hack/helm-bin.sh``): ``$HYPERPLACE_HELM`` (hack/test.sh exports
it) or else whatever ``bash hack/helm-bin.sh`` prints, building when needed. When it cannot be had
(no Go, module proxy down), the caller is skipped with the reason, never failed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def helm_bin() -> Path:
    """The helm binary, or a pytest skip saying why there is none."""
    reason = os.environ.get("HYPERPLACE_HELM_ERROR")
    if reason:
        pytest.skip(f"needs helm: hack/helm-bin.sh failed: {reason}")
    env = os.environ.get("HYPERPLACE_HELM")
    if env:
        return Path(env)
    try:
        out = subprocess.run(
            ["bash", str(REPO / "hack" / "helm-bin.sh")], capture_output=True, text=True, timeout=3600
        )
    except subprocess.TimeoutExpired:
        pytest.skip("needs helm: hack/helm-bin.sh took over an hour")
    if out.returncode != 0:
        last = "\n".join(out.stderr.strip().splitlines()[-5:])
        why = (
            "Go is not installed and helm is not cached" if shutil.which("go") is None else "the build failed"
        )
        pytest.skip(f"needs helm: {why}; hack/helm-bin.sh exited {out.returncode}: {last}")
    return Path(out.stdout.strip().splitlines()[-1])
