"""Where the Go-built control plane lives (``hack/kube-bin.sh``), shared by the real-apiserver tests
and the CRD check: ``$HYPERPLACE_KUBE_BIN`` (hack/test.sh exports it) or else whatever
``bash hack/kube-bin.sh`` prints, building when needed. When it cannot be had (no Go, module proxy
down), the caller is skipped with the reason, never failed."""

from __future__ import annotations

from pathlib import Path

from .go_bin import go_built


def kube_bin_dir() -> Path:
    """The directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
    crdcheck, or a pytest skip saying why there is none."""
    return go_built("kube-bin.sh", "needs the Go-built control plane", "HYPERPLACE_KUBE_BIN")
