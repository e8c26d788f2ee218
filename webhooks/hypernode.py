"""Validating webhook for HyperNodes (``POST /hypernodes/validate``).

Checks, each message prefixed with the field it is about:

* Volcano's webhook: ``members`` non-empty, every ``regexMatch`` compiles under Go's RE2
  syntax (message ``member regexMatch pattern is invalid: <Go error>``).
* Volcano's former webhook / ValidatingAdmissionPolicy and the CRD's CEL rules, so an
  apiserver without them is still protected: exactly one selector per member, names
  required, ``exactMatch.name`` a DNS-1123 subdomain.
* What Volcano's scheduler silently ignores or chokes on: ``labelMatch`` and
  ``regexMatch`` on HyperNode members (only ``exactMatch`` makes a child), a HyperNode
  listing itself, and, with a HyperNode cache, cycles, second parents and a child whose
  tier is not lower than its parent's (each of which makes Volcano's tree "not ready",
  blocking every topology job in the cluster).

User patterns are compiled only with RE2 (``compile_go_regex``), never with Python ``re``.
The object is read as a raw dict so malformed input never raises here; the schema step
of ``admit`` reports wrong types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.api import HyperNode
from hyperplace.api.spares import spare_problems
from hyperplace.kube.goregex import GoRegexError, compile_go_regex
from hyperplace.kube.hypertree import child_claims
from hyperplace.kube.labels import LABEL_VALUE, QUALIFIED_NAME

from .context import AdmissionContext, Verdict, as_dict, as_int, as_list
from .names import is_dns1123_subdomain, quote_go

MEMBERS_REQUIRED = "member must have at least one member"
# The CRD's CEL messages, reused so users see one wording whichever layer caught it.
SELECTOR_REQUIRED = "Either ExactMatch or RegexMatch or LabelMatch must be specified"
SELECTOR_EXCLUSIVE = "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
EXACT_NAME_REQUIRED = "member exactMatch name is required"
REGEX_REQUIRED = "member regexMatch pattern is required"
REGEX_INVALID = "member regexMatch pattern is invalid: "
SELECTOR_KINDS = ("exactMatch", "regexMatch", "labelMatch")
_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _check_label_selector(sel: dict[str, Any], path: str, v: Verdict) -> None:
    labels = sel.get("matchLabels")
    exprs = sel.get("matchExpressions")
    for key, value in as_dict(labels).items():
        if not QUALIFIED_NAME.match(str(key)):
            v.messages.append(f"{path}.matchLabels: Invalid value: {quote_go(key)}: not a valid label key")
        if not isinstance(value, str) or not LABEL_VALUE.match(value) or len(value) > 63:
            v.messages.append(
                f"{path}.matchLabels: Invalid value: {quote_go(value)}: not a valid label value"
            )
    for j, req in enumerate(as_list(exprs)):
        rp = f"{path}.matchExpressions[{j}]"
        req = as_dict(req)
        op = req.get("operator")
        values = req.get("values")
        if op not in _LABEL_OPERATORS:
            v.messages.append(
                f"{rp}.operator: Unsupported value: {quote_go(op)}: supported values: "
                + ", ".join(quote_go(o) for o in _LABEL_OPERATORS)
            )
        elif op in ("In", "NotIn") and not values:
            v.messages.append(
                f"{rp}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )
        elif op in ("Exists", "DoesNotExist") and values:
            v.messages.append(
                f"{rp}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        if not isinstance(req.get("key"), str) or not QUALIFIED_NAME.match(req["key"]):
            v.messages.append(f"{rp}.key: Invalid value: {quote_go(req.get('key'))}: not a valid label key")
    if not as_dict(labels) and not as_list(exprs):
        v.warnings.append(f"{path}: an empty label selector selects no nodes")


def regex_patterns(obj: Mapping[str, Any]) -> list[str]:
    """Every non-empty ``regexMatch.pattern`` string of a raw HyperNode, in order."""
    out = []
    for member in as_list(as_dict(obj.get("spec")).get("members")):
        sel = as_dict(as_dict(member).get("selector"))
        pattern = as_dict(sel.get("regexMatch")).get("pattern")
        if isinstance(pattern, str) and pattern:
            out.append(pattern)
    return out


def _regex_error(pattern: str, ctx: AdmissionContext | None) -> str | None:
    if ctx is not None and ctx.regex_verdicts is not None and pattern in ctx.regex_verdicts:
        return ctx.regex_verdicts[pattern]
    try:
        compile_go_regex(pattern)
    except GoRegexError as exc:
        return str(exc)
    return None


def _check_members(
    obj: Mapping[str, Any], self_name: str, v: Verdict, ctx: AdmissionContext | None = None
) -> list[tuple[int, str]]:
    """Per-member checks; returns ``(index, name)`` of every exactMatch HyperNode member."""
    children: list[tuple[int, str]] = []
    members = as_dict(obj.get("spec")).get("members")
    if not isinstance(members, list) or not members:
        v.messages.append(f"spec.members: {MEMBERS_REQUIRED}")
        return children
    for i, raw in enumerate(members):
        base = f"spec.members[{i}]"
        member = as_dict(raw)
        mtype = member.get("type")
        if mtype is None:
            v.messages.append(f"{base}.type: Required value")
        elif mtype not in ("Node", "HyperNode"):
            v.messages.append(
                f'{base}.type: Unsupported value: {quote_go(mtype)}: supported values: "Node", "HyperNode"'
            )
        sel = as_dict(member.get("selector"))
        kinds = [k for k in SELECTOR_KINDS if sel.get(k) is not None]
        if not kinds:
            v.messages.append(f"{base}.selector: {SELECTOR_REQUIRED}")
            continue
        if len(kinds) > 1:
            v.messages.append(f"{base}.selector: {SELECTOR_EXCLUSIVE}")
        if "exactMatch" in kinds:
            name = as_dict(sel["exactMatch"]).get("name")
            path = f"{base}.selector.exactMatch.name"
            if not isinstance(name, str) or not name:
                v.messages.append(f"{path}: {EXACT_NAME_REQUIRED}")
            elif errs := is_dns1123_subdomain(name):
                v.messages.append(f"{path}: Invalid value: {quote_go(name)}: {'; '.join(errs)}")
            elif mtype == "HyperNode":
                if name == self_name:
                    v.messages.append(f"{path}: a HyperNode cannot be a member of itself")
                else:
                    children.append((i, name))
        if "regexMatch" in kinds:
            pattern = as_dict(sel["regexMatch"]).get("pattern")
            path = f"{base}.selector.regexMatch.pattern"
            if not isinstance(pattern, str) or not pattern:
                v.messages.append(f"{path}: {REGEX_REQUIRED}")
            else:
                error = _regex_error(pattern, ctx)
                if error is not None:
                    v.messages.append(f"{path}: {REGEX_INVALID}{error}")
            if mtype == "HyperNode":
                v.messages.append(
                    f"{base}.selector.regexMatch: a HyperNode member must be selected with exactMatch "
                    "(Volcano ignores regexMatch for HyperNode members)"
                )
        if "labelMatch" in kinds:
            if mtype == "HyperNode":
                v.messages.append(
                    f"{base}.selector.labelMatch: labelMatch only takes effect for members of type Node; "
                    "a HyperNode member must be selected with exactMatch"
                )
            else:
                _check_label_selector(as_dict(sel["labelMatch"]), f"{base}.selector.labelMatch", v)
    return children


def _ancestors(name: str, parents: Mapping[str, list[str]]) -> dict[str, str]:
    """Every ancestor of ``name`` -> the node it was reached from (for cycle paths)."""
    seen: dict[str, str] = {}
    frontier = [name]
    while frontier:
        cur = frontier.pop()
        for p in parents.get(cur, []):
            if p not in seen and p != name:
                seen[p] = cur
                frontier.append(p)
    return seen


def _check_tree(
    self_name: str,
    tier: int | None,
    tier_name: Any,
    children: list[tuple[int, str]],
    hypernodes: Mapping[str, HyperNode],
    v: Verdict,
) -> None:
    others = {n: hn for n, hn in hypernodes.items() if n != self_name}
    parents: dict[str, list[str]] = {}
    for pname in sorted(others):
        for child in child_claims(others[pname]):
            parents.setdefault(child, []).append(pname)

    up = _ancestors(self_name, parents)
    for i, child in children:
        path = f"spec.members[{i}].selector.exactMatch.name"
        owners = [p for p in parents.get(child, []) if p != self_name]
        if owners:
            v.messages.append(
                f'{path}: HyperNode "{child}" already has a parent "{owners[0]}"; a HyperNode may have only one parent'
            )
        if child in up:
            chain = [child]
            while chain[-1] != self_name:
                chain.append(up[chain[-1]])
            cycle = " -> ".join([*chain, child])  # "a -> b": a lists b as a member
            v.messages.append(
                f'{path}: HyperNode "{child}" is an ancestor of "{self_name}"; this would create a cycle ({cycle})'
            )
        known = others.get(child)
        if known is None:
            v.warnings.append(
                f'{path}: HyperNode "{child}" does not exist yet; it becomes a child when created'
            )
        elif tier is not None and known.spec.tier >= tier:
            v.messages.append(
                f'{path}: member HyperNode "{child}" has tier {known.spec.tier}, which is not lower than '
                f"this HyperNode's tier {tier}"
            )
    if tier is not None:
        for pname in parents.get(self_name, []):
            ptier = others[pname].spec.tier
            if tier >= ptier:
                v.messages.append(
                    f'spec.tier: tier {tier} is not lower than the tier {ptier} of parent HyperNode "{pname}"'
                )
        if len(parents.get(self_name, [])) > 1:
            v.warnings.append(
                f'metadata.name: HyperNode "{self_name}" is already listed by several parents: '
                + ", ".join(parents[self_name])
            )
    if isinstance(tier_name, str) and tier_name and tier is not None:
        for other in sorted(others):
            hn = others[other]
            if hn.spec.tier_name == tier_name and hn.spec.tier != tier:
                v.warnings.append(
                    f'spec.tierName: tierName "{tier_name}" already names tier {hn.spec.tier} '
                    f'(HyperNode "{other}"); jobs naming it would resolve to either tier'
                )
                break


def validate_hypernode(
    obj: Mapping[str, Any],
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    ctx: AdmissionContext | None = None,
) -> Verdict:
    """The ``/hypernodes/validate`` webhook on a raw HyperNode dict.

    CREATE and UPDATE are checked alike (``old`` is not needed: the tree checks use the
    cache without the object's previous version); other operations are allowed.
    """
    v = Verdict()
    if operation not in ("CREATE", "UPDATE"):
        return v
    name = as_dict(obj.get("metadata")).get("name")
    self_name = name if isinstance(name, str) else ""
    spec = as_dict(obj.get("spec"))
    children = _check_members(obj, self_name, v, ctx)
    for problem in spare_problems(as_dict(as_dict(obj.get("metadata")).get("annotations"))):
        v.messages.append(problem)
    tier = as_int(spec.get("tier"))
    if ctx is not None and ctx.hypernodes is not None and self_name:
        _check_tree(self_name, tier, spec.get("tierName"), children, ctx.hypernodes, v)
    return v
