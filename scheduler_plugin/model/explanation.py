"""Bounded, structured explanations of why a job (or pod) was not placed.

An :class:`Explanation` holds a one-line summary, the per-tier search report (best domain found
at each tier and what it lacks), the kube-scheduler style predicate summary and other reasons
(missing queue, HyperNode tree not ready, unknown tier name). Sizes are capped so that a
10,000-node cluster still produces a short message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.constants import CLUSTER_TOP_HYPERNODE
from hyperplace.kube import format_milli

MAX_REASONS = 8
MAX_TIERS = 8
MAX_PREDICATE_KINDS = 6
# Candidate domains listed per tier in ``explain`` (the rest are counted) and the longest reason.
MAX_CANDIDATES_PER_TIER = 10
MAX_CANDIDATE_REASON = 160
MAX_SEARCHES = 4  # domain searches kept per job and session


@dataclass
class TierAttempt:
    """What the search found at one tier: the best domain and what it lacks."""

    tier: int
    candidates: int  # domains of this tier inside the search scope
    best: str | None = None
    fits: int = 0
    needed: int = 0
    unit: str = "pods"  # "pods" or "partitions"
    lacking: list[str] = field(default_factory=list)
    note: str | None = None

    def line(self) -> str:
        """The human form of this tier's result."""
        if self.candidates == 0:
            return f"tier {self.tier}: no domain within the allowed scope"
        if self.best is None:
            return f"tier {self.tier}: {self.note or 'no candidate'}"
        # The virtual root is no HyperNode a user wrote: say what it stands for.
        where = "the whole cluster" if self.best == CLUSTER_TOP_HYPERNODE else f"best {self.best}"
        text = f"tier {self.tier}: {where} fits {self.fits} of {self.needed} {self.unit}"
        if self.lacking:
            text += ", " + ", ".join(self.lacking)
        if self.note:
            text += f" ({self.note})"
        return text


@dataclass
class Explanation:
    """Why a job is not (fully) placed. ``lines()`` gives the human form."""

    summary: str
    reason: str = "NotEnoughResources"
    tiers: list[TierAttempt] = field(default_factory=list)
    predicates: str | None = None
    details: list[str] = field(default_factory=list)

    def add_detail(self, text: str) -> None:
        """Add a free-text reason (deduplicated, capped)."""
        if len(self.details) < MAX_REASONS and text not in self.details:
            self.details.append(text)

    def add_tier(self, attempt: TierAttempt) -> None:
        """Add a per-tier result (capped)."""
        if len(self.tiers) < MAX_TIERS:
            self.tiers.append(attempt)

    def lines(self) -> list[str]:
        """Summary, per-tier lines, predicate summary, details."""
        out = [self.summary]
        out.extend(t.line() for t in self.tiers)
        if self.predicates:
            out.append(self.predicates)
        out.extend(self.details)
        return out

    def message(self) -> str:
        """All lines joined with '; ' (for conditions and pod reasons)."""
        return "; ".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "summary": self.summary,
            "reason": self.reason,
            "tiers": [t.line() for t in self.tiers],
            "predicates": self.predicates,
            "details": list(self.details),
        }


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_CANDIDATE_REASON:
        return text
    return text[: MAX_CANDIDATE_REASON - 1] + "…"


@dataclass
class Candidate:
    """One HyperNode the scheduler considered for a job, as it judged it."""

    hypernode: str
    tier: int
    feasible: bool  # passes the fit counts (every shape, every partition class)
    score: float | None = None  # HyperNode order score used to rank it; None when not scored
    reason: str | None = None  # what it lacked, or why it was not taken
    order: dict[str, int] = field(default_factory=dict)  # sort keys ranked before the score

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``explain --output json`` ``candidates`` entries)."""
        out: dict[str, Any] = {
            "hyperNode": self.hypernode,
            "tier": self.tier,
            "feasible": self.feasible,
            "score": None if self.score is None else round(self.score, 4),
            "reason": _bounded(self.reason),
        }
        if self.order:
            out["order"] = dict(self.order)
        return out


@dataclass
class CandidateTier:
    """The candidates of one gradient tier, in the order the scheduler tried them."""

    tier: int
    domains: int  # HyperNodes of this tier in the search scope
    feasible: int  # of which pass the counts
    candidates: list[Candidate] = field(default_factory=list)  # capped at MAX_CANDIDATES_PER_TIER

    @property
    def omitted(self) -> int:
        """Domains of this tier not listed."""
        return self.domains - len(self.candidates)


@dataclass
class DomainSearch:
    """One domain search of a job (its gang minimum, or more pods of a job already running)."""

    unit: str  # what was placed, e.g. "gang minimum (4 pods)" or "4 more pods"
    gang: bool  # True for the gang minimum (the search that picks the job's domain)
    tiers: list[CandidateTier] = field(default_factory=list)
    chosen: str | None = None
    note: str | None = None

    def candidates(self) -> list[Candidate]:
        """Every listed candidate, tier by tier, in the scheduler's order."""
        return [c for t in self.tiers for c in t.candidates]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "unit": self.unit,
            "candidates": [c.to_dict() for c in self.candidates()],
            "chosen": self.chosen,
            "tiers": [
                {"tier": t.tier, "domains": t.domains, "feasible": t.feasible, "omitted": t.omitted}
                for t in self.tiers
            ],
            "note": self.note,
        }


@dataclass
class CandidateReport:
    """The scheduler's own domain searches for a job, first (the gang minimum's) first."""

    searches: list[DomainSearch] = field(default_factory=list)
    dropped: int = 0  # searches beyond MAX_SEARCHES, not kept

    def add(self, search: DomainSearch) -> None:
        """Keep a search (capped)."""
        if len(self.searches) < MAX_SEARCHES:
            self.searches.append(search)
        else:
            self.dropped += 1

    def after(self, earlier: CandidateReport | None) -> CandidateReport:
        """This report, preceded by the gang-minimum searches of ``earlier`` when this one has
        only searches for more pods (the job's domain was chosen in an earlier cycle)."""
        if earlier is None or any(s.gang for s in self.searches):
            return self
        out = CandidateReport()
        for s in [*(s for s in earlier.searches if s.gang), *self.searches]:
            out.add(s)
        return out

    @property
    def main(self) -> DomainSearch | None:
        """The search that chose the job's domain (the gang minimum's), else the first."""
        return next((s for s in self.searches if s.gang), self.searches[0] if self.searches else None)


def predicate_summary(total_nodes: int, reasons: Sequence[str | None]) -> str:
    """kube-scheduler style: ``0/8 nodes are available: 5 Insufficient cpu, 3 node(s) were unschedulable.``"""
    counts = Counter(r for r in reasons if r)
    return predicate_summary_of_counts(total_nodes, sum(1 for r in reasons if not r), counts)


def predicate_summary_of_counts(total_nodes: int, available: int, counts: Mapping[str, int]) -> str:
    """:func:`predicate_summary` from the number of available nodes and a count per reason."""
    parts = [f"{n} {r}" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if len(parts) > MAX_PREDICATE_KINDS:
        parts = [*parts[:MAX_PREDICATE_KINDS], f"{len(parts) - MAX_PREDICATE_KINDS} more kinds"]
    text = f"{available}/{total_nodes} nodes are available"
    return text + (": " + ", ".join(parts) + "." if parts else ".")


def shortage(
    resources: Sequence[str],
    free: npt.NDArray[np.int64],
    demand: npt.NDArray[np.int64],
    nodes_short: int = 0,
) -> list[str]:
    """``short 8 nvidia.com/gpu`` entries where the aggregate free is below the demand."""
    out = []
    for i, r in enumerate(resources):
        if r == "pods":
            continue
        lack = int(demand[i]) - int(max(free[i], 0))
        if lack > 0:
            text = f"short {format_milli(r, lack)} {r}"
            if nodes_short:
                text += f" on {nodes_short} node{'s' if nodes_short != 1 else ''}"
            out.append(text)
    if not out and nodes_short:
        out.append(
            f"free resources fragmented: {nodes_short} more node{'s' if nodes_short != 1 else ''} needed"
        )
    return out[:4]
