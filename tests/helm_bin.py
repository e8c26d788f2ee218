"""Where the Go-built helm lives (``hack/helm-bin.sh``): ``$HYPERPLACE_HELM`` (hack/test.sh exports
it) or else whatever ``bash hack/helm-bin.sh`` prints, building when needed. When it cannot be had
(no Go, module proxy down), the caller is skipped with the reason, never failed."""

from __future__ import annotations

from pathlib import Path

from .go_bin import go_built


def helm_bin() -> Path:
    """The helm binary, or a pytest skip saying why there is none."""
    return go_built("helm-bin.sh", "needs helm", "HYPERPLACE_HELM", cached="helm is not cached")
