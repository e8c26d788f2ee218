"""``hyperplace explain``: where a job went and why, or why it waits."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hyperplace.api.ring import RankedPod, ring_crossings

from .render import explanation_dict, hn_label, job_colors, job_renderable, tier_of, waiting_lines
from .resources import format_free, main_resources
from .result import SimResult
from .topology import TopologyView, natural_key, natural_order
from .views import JobView, subgroup_label

# JobOutcome attributes beyond the contract's that, when a scheduler reports them, explain a
# placement (scores of the candidate domains, the alternatives it considered).
_EXTRA_OUTCOME_FIELDS = ("scores", "alternatives", "gradient", "considered")
# Candidates per tier the table shows (the JSON has the scheduler's bounded list).
TABLE_CANDIDATES_PER_TIER = 5


def _domains(view: JobView, topo: TopologyView) -> dict[str, list[str]]:
    """leaf HyperNode -> pods of the job running under it."""
    out: dict[str, list[str]] = {}
    for p in view.pods:
        if p.node:
            out.setdefault(p.leaf or "(no HyperNode)", []).append(p.name)
    return natural_order(out)


MAX_OTHER_DOMAINS = 8


def other_domains(view: JobView, topo: TopologyView) -> list[dict[str, Any]]:
    """Other HyperNodes of the allocated tier with what they have free now (after this run).

    The scheduler reports no per-candidate scores, so this is the next best thing for
    "could it have gone elsewhere": same-tier domains, fullest first (bin packing order).
    """
    tier = tier_of(topo, view.allocated)
    if tier is None:
        return []
    resources = main_resources(topo.allocatable.values())
    rows: list[tuple[int, list[Any], dict[str, Any]]] = []
    for name, v in topo.hypernodes.items():
        if v.tier != tier or name == view.allocated or not v.nodes:
            continue
        free = {r: topo.free_total(v.nodes, r)[0] for r in resources}
        total = {r: topo.free_total(v.nodes, r)[1] for r in resources}
        # Fullest first (least free of the first resource): the order bin packing prefers.
        order = free[resources[0]] if resources else 0
        rows.append(
            (order, natural_key(name), {"hyperNode": name, "tier": tier, "free": free, "allocatable": total})
        )
    rows.sort(key=lambda r: (r[0], r[1]))
    out = [r[2] for r in rows]
    return out[:MAX_OTHER_DOMAINS]


def candidates_dict(outcome: Any) -> dict[str, Any]:
    """``candidates`` and ``chosen`` of the search that chose the job's domain (its gang
    minimum's: tiers in gradient order, each tier's domains in the order the scheduler tried
    them), that search's per-tier counts, and every search of the job (``searches``)."""
    report = getattr(outcome, "candidates", None)
    main = report.main if report is not None else None
    if report is None or main is None:
        return {"candidates": [], "chosen": None, "candidateTiers": [], "searches": []}
    doc = main.to_dict()
    return {
        "candidates": doc["candidates"],
        "chosen": doc["chosen"],
        "candidateTiers": doc["tiers"],
        "searches": [s.to_dict() for s in report.searches],
    }


def job_ring_crossings(view: JobView) -> dict[str, Any] | None:
    """Ring crossings of a placed job's ranked pods (None while no pod with a rank is placed)."""
    ranked = [
        RankedPod(p.task or "", p.index, p.partition, p.leaf)
        for p in view.pods
        if p.node and p.index is not None
    ]
    return ring_crossings(ranked) if ranked else None


def explain_dict(view: JobView, result: SimResult, topo: TopologyView) -> dict[str, Any]:
    """The ``explain --output json`` document."""
    outcome = view.outcome
    extras = {
        f: explanation_dict(getattr(outcome, f)) for f in _EXTRA_OUTCOME_FIELDS if getattr(outcome, f, None)
    }
    return {
        "job": view.key,
        "kind": view.kind,
        "podGroup": view.podgroup,
        "phase": view.phase,
        "minMember": view.min_member,
        "networkTopology": view.topology_spec,
        "allocatedHyperNode": view.allocated,
        "tier": tier_of(topo, view.allocated),
        "subGroups": {
            subgroup_label(k, view.podgroup): {"hyperNode": v, "tier": tier_of(topo, v)}
            for k, v in sorted(view.subgroups.items(), key=lambda kv: natural_key(kv[0]))
        },
        "domains": _domains(view, topo),
        "otherDomains": other_domains(view, topo),
        "pods": {
            p.key: {"phase": p.phase, "node": p.node, "hyperNode": p.leaf, "reason": p.reason}
            for p in view.pods
        },
        "waiting": view.waiting,
        "explanation": explanation_dict(getattr(outcome, "explanation", None))
        if outcome is not None
        else None,
        "conditions": view.conditions,
        "schedulerNotes": list(result.notes),
        **candidates_dict(outcome),
        # A time-bounded topology relaxation (hyperplace.io/relax-topology): the tier in force
        # and when it next widens; null for jobs without one.
        "relaxation": getattr(outcome, "relaxation", None),
        # Consecutive ranks (volcano.sh/task-index) in different leaves: {job, pairs, partitions}.
        "ringCrossings": job_ring_crossings(view),
        **extras,
        **_preemption(view, result),
        **_reservation(view, result),
        "scores": _scores(view, result),
    }


def _scores(view: JobView, result: SimResult) -> dict[str, Any] | None:
    """``scores``: what the plugins of the last session made of its snapshot for this job
    before any action ran (parsed arguments, node scores per task, HyperNode scores per
    SubJob, each by plugin); null when no session ran or the job was not in it."""
    if result.snapshot is None or result.config is None or view.podgroup not in result.snapshot.jobs:
        return None
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from scheduler_plugin.cycle.scores import session_scores

    return session_scores(result.snapshot, result.config, jobs={view.podgroup}, clock=result.clock).as_dict()


def _reservation(view: JobView, result: SimResult) -> dict[str, Any]:
    """``reservation``: the HyperNode held for this gang, since when and (when the pods it waits
    for have time limits) its estimated start, only while held; ``backfill``: for a job placed
    inside room held for another gang because its time limit ends before that gang's start."""
    held = getattr(result.session, "reservations", None) or {}
    out: dict[str, Any] = {}
    res = held.get(view.podgroup)
    if res is not None:
        out["reservation"] = {
            "hyperNode": res.hypernode,
            "since": res.since,
            "reason": res.reason,
            "estimatedStart": res.estimated_start,
        }
    lines = [line for r in held.values() if (line := r.backfill_line(view.podgroup)) is not None]
    if lines:
        out["backfill"] = lines
    return out


def _preemption(view: JobView, result: SimResult) -> dict[str, Any]:
    """``preemption``: the pods this job evicted and why that domain (only for a preemptor)."""
    why = result.preemption_reasons.get(view.podgroup)
    if why is None:
        return {}
    victims = [
        {"pod": ev.victim, "node": ev.node, "job": ev.victim_job, "action": ev.action, "reason": ev.reason}
        for ev in result.preemptions
        if ev.preemptor == view.podgroup
    ]
    return {"preemption": {"why": why, "victims": victims}}


def render_explain(console: Console, view: JobView, result: SimResult, topo: TopologyView) -> None:
    """The human form of ``explain``: the job table, its placement or why it waits."""
    colors = job_colors([view])
    console.print(job_renderable(view, topo, colors[view.podgroup], explain=False))
    console.print()
    outcome = view.outcome
    if outcome is None:
        console.print(
            Text("The scheduler did not consider this job (no session ran for it).", style="yellow")
        )
        return
    if view.allocated:
        console.print(Text("Placement", style="bold"))
        console.print(f"  the job runs in {hn_label(topo, view.allocated)}")
        domains = _domains(view, topo)
        for leaf, pods in domains.items():
            console.print(f"  {leaf}: {len(pods)} pod{'s' if len(pods) != 1 else ''}")
        for sid, hn in sorted(view.subgroups.items(), key=lambda kv: natural_key(kv[0])):
            if sid != view.podgroup:
                console.print(f"  partition {subgroup_label(sid, view.podgroup)}: {hn_label(topo, hn)}")
        others = other_domains(view, topo)
        if others:
            console.print(
                Text(f"Other tier-{others[0]['tier']} domains, free now (fullest first)", style="bold")
            )
            for d in others:
                free = "  ".join(format_free(r, d["free"][r], d["allocatable"][r]) for r in d["free"])
                console.print(f"  {d['hyperNode']}: {free}")
        ring = job_ring_crossings(view)
        if ring is not None:
            parts = ring["partitions"]
            within = f", {sum(parts.values())} within partitions" if parts else ""
            console.print(
                f"  ring crossings: {ring['job']} of {ring['pairs']} consecutive-rank pairs change leaf{within}"
            )
        pending = len(view.pods) - view.running
        if pending:
            console.print(
                f"  {pending} more pod{'s' if pending != 1 else ''} pending: the gang minimum "
                f"({view.min_member}) runs, the rest must fit in the same domain"
            )
    _render_candidates(console, outcome)
    for f in _EXTRA_OUTCOME_FIELDS:
        value = getattr(outcome, f, None)
        if not value:
            continue
        console.print(Text(f.capitalize(), style="bold"))
        data = explanation_dict(value)
        if isinstance(data, dict):
            t = Table(box=None, show_header=False, padding=(0, 2))
            for k, v in data.items():
                t.add_row(str(k), str(v))
            console.print(t)
        else:
            console.print(f"  {data}")
    pre = _preemption(view, result).get("preemption")
    if pre is not None:
        console.print(Text("Preemption", style="bold"))
        console.print(f"  {pre['why']}")
        for v in pre["victims"]:
            console.print(f"  evicted {v['pod']} on {v['node']} ({v['job']})")
    held = _reservation(view, result)
    if "reservation" in held:
        r = held["reservation"]
        console.print(Text("Reservation", style="bold"))
        start = r["estimatedStart"] or "unknown (a pod it waits for has no activeDeadlineSeconds)"
        console.print(f"  {r['hyperNode']} held since {r['since']}: {r['reason']}; estimated start {start}")
    for line in held.get("backfill", []):
        console.print(Text("Backfill", style="bold"))
        console.print(f"  {line}")
    lines = waiting_lines(view) if view.waiting else []
    if lines:
        console.print(
            Text("Why waiting" if view.waiting else "Notes", style="bold yellow" if view.waiting else "bold")
        )
        for line in lines:
            console.print(f"  {line}")
    elif view.waiting:
        console.print(Text("Waiting; the scheduler gave no reason.", style="yellow"))
    if view.conditions:
        console.print(Text("Conditions", style="bold"))
        for c in view.conditions:
            msg = c.get("message") or ""
            console.print(f"  {c.get('type')}={c.get('status')} {c.get('reason') or ''} {msg}".rstrip())


def _render_candidates(console: Console, outcome: Any) -> None:
    """The top candidates of every tier the scheduler tried, in its order, per search."""
    report = getattr(outcome, "candidates", None)
    if report is None:
        return
    for search in report.searches:
        console.print(Text(f"Domain search for the {search.unit}", style="bold"))
        if search.note:
            console.print(f"  {search.note}")
        if search.tiers:
            console.print(
                Text("  the scheduler's candidates, tier by tier, in the order it tried them", style="dim")
            )
        for tier in search.tiers:
            console.print(f"  tier {tier.tier}: {tier.domains} domains, {tier.feasible} pass the fit counts")
            shown = tier.candidates[:TABLE_CANDIDATES_PER_TIER]
            t = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False)
            for c in shown:
                mark = Text("✓", style="green") if c.feasible else Text("✗", style="red")
                score = "" if c.score is None else f"score {c.score:.2f}"
                why = "chosen" if c.hypernode == search.chosen and c.feasible else (c.reason or "")
                t.add_row("   ", mark, c.hypernode, score, why)
            console.print(t)
            more = tier.domains - len(shown)
            if more > 0:
                console.print(Text(f"    and {more} more", style="dim"))
