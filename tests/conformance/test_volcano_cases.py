"""Volcano v1.15.1's own scheduler test cases, run through our session (issue 37).

Each converted case (``cases/``, written by ``hack/volcano-conformance.py``) runs once, as
Volcano's uthelper runs it, and must end as Volcano's test expects, or as
``differences.yaml`` says we deliberately end instead (that outcome is checked just as
strictly). A case that could not be converted is listed with its reason, and must say why.
"""

from __future__ import annotations

import pytest

from tests.conformance.cases import load_cases, load_tableless
from tests.conformance.differences import (
    DOC,
    README,
    load_differences,
    render_table,
    status_line,
    with_status,
)
from tests.conformance.session import case_scores, mismatches, outcome_of, run_case, score_mismatches

CASES = load_cases()
DIFFERENCES = load_differences()


def problems_of(body: dict, ours: dict) -> list[str]:
    """How the case's session differs from the expectations (``ours`` replacing Volcano's where
    we differ on purpose): what an action run ends with or, for a plugin test that asks the
    opened session for scores, the scores the session sums."""
    if "scores" in body:
        return score_mismatches({**body["scores"], **ours}, case_scores(body), body["objects"]["pods"])
    return mismatches({**body["expect"], **ours}, outcome_of(body, run_case(body)))


@pytest.mark.parametrize("case", [c for c in CASES if "not_convertible" not in c.body], ids=lambda c: c.id)
def test_case_ends_as_volcano_or_as_documented(case):
    diff = DIFFERENCES.get(case.id)
    if diff is not None and diff.bug:
        # A bug of ours listed in docs/volcano-differences.md with its fix: it must still end
        # differently from Volcano (once fixed, its entry goes).
        try:
            problems = problems_of(case.body, {})
        except Exception as exc:  # a crash is the bug too
            problems = [repr(exc)]
        assert problems, "this case now ends as Volcano's: take it out of differences.yaml"
        pytest.xfail(f"our bug, not fixed yet: {diff.why}")
    problems = problems_of(case.body, {} if diff is None else diff.ours)
    assert not problems, (case.body["source"]["name"], problems)


def test_every_not_convertible_case_says_why():
    for case in CASES:
        if "not_convertible" in case.body:
            assert case.body["not_convertible"].strip(), case.id


def test_every_difference_names_a_converted_case():
    ids = {c.id for c in CASES if "not_convertible" not in c.body}
    assert set(DIFFERENCES) <= ids, sorted(set(DIFFERENCES) - ids)


def test_the_differences_table_and_the_readme_line_are_up_to_date():
    assert DOC.read_text() == render_table(CASES, DIFFERENCES, load_tableless()), (
        "run: python hack/volcano-conformance.py --docs-only"
    )
    readme = README.read_text()
    assert with_status(readme, status_line(CASES, DIFFERENCES)) == readme, (
        "run: python hack/volcano-conformance.py --docs-only"
    )
