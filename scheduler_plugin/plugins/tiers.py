"""Per-tier registries (Volcano's tiered victim selection)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..framework.session import Session


def tier_list(per_tier: list[list[Any]], ssn: Session) -> list[Any]:
    """The list of the configuration tier being built in a per-tier registry such as
    ``ssn.preemptable_fns``; ``build_plugins`` says which tier that is."""
    i = int(ssn.plugins.get("__tier__", 0))
    while len(per_tier) <= i:
        per_tier.append([])
    return per_tier[i]
