"""Where the Go-built control plane lives (``hack/kube-bin.sh``), shared by the real-apiserver tests
and the CRD check: ``$HYPERPLACE_KUBE_BIN`` (hack/test.sh exports it) or else whatever
``bash hack/kube-bin.sh`` prints, building when needed. When it cannot be had (no Go, module proxy
down), the caller is skipped with the reason, never failed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def kube_bin_dir() -> Path:
    """The directory with etcd, kube-apiserver, kube-controller-manager and crdcheck, or a pytest
    skip saying why there is none."""
    reason = os.environ.get("HYPERPLACE_KUBE_BIN_ERROR")
    if reason:
        pytest.skip(f"needs the Go-built control plane: hack/kube-bin.sh failed: {reason}")
    env = os.environ.get("HYPERPLACE_KUBE_BIN")
    if env:
        return Path(env)
    try:
        out = subprocess.run(
            ["bash", str(REPO / "hack" / "kube-bin.sh")], capture_output=True, text=True, timeout=3600
        )
    except subprocess.TimeoutExpired:
        pytest.skip("needs the Go-built control plane: hack/kube-bin.sh took over an hour")
    if out.returncode != 0:
        last = "\n".join(out.stderr.strip().splitlines()[-5:])
        # hack/kube-bin.sh needs Go only to build; say which of the two stopped it.
        why = (
            "Go is not installed and the binaries are not cached"
            if shutil.which("go") is None
            else "the build failed"
        )
        pytest.skip(
            f"needs the Go-built control plane: {why}; hack/kube-bin.sh exited {out.returncode}: {last}"
        )
    return Path(out.stdout.strip().splitlines()[-1])
