"""A HyperNode regexMatch pattern is admitted exactly when Go's ``regexp.Compile`` (the Go
release Volcano builds with) accepts it, within this webhook's documented limits.

The corpus is Go's own: every string of its regexp test files and test data, plus
hostile edge cases, each with Go's verdict, extracted and judged by
``hack/gen_go_regex.py`` with a real Go toolchain.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyperplace.kube import _go_unicode
from hyperplace.kube.goregex import (
    MAX_PATTERN_LENGTH,
    NESTING_PARITY_DEPTH,
    GoRegexError,
    check_go_regex,
    compile_go_regex,
    go_regex_search,
)

CORPUS = Path(__file__).parent / "fixtures" / "go_regex_corpus.jsonl"
FUZZ = Path(__file__).parent / "fixtures" / "go_regex_fuzz.jsonl"


def load_corpus() -> tuple[dict, list[tuple[str, str, str | None]]]:
    with CORPUS.open(encoding="utf-8") as fh:
        header = json.loads(next(fh))
        rows = [tuple(json.loads(line)) for line in fh]
    return header, rows  # type: ignore[return-value]


def beyond_documented_limits(pattern: str, ours: str | None) -> bool:
    """Where we may refuse what Go accepts: the length cap, RE2's program budget, and
    nesting deeper than the parity depth (see hyperplace.kube.goregex)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return True
    if ours is not None and "RE2 program budget" in ours:
        return True
    return pattern.count("(") > NESTING_PARITY_DEPTH


def test_corpus_was_judged_by_the_go_release_our_unicode_tables_come_from():
    header, rows = load_corpus()
    assert header["go"] == _go_unicode.GO_VERSION
    assert len(rows) == header["patterns"] > 15_000
    assert {src for _, src, _ in rows} >= {"parse_test.go", "re2-search.txt", "re2-exhaustive", "hostile"}


def test_every_verdict_agrees_with_go_within_the_documented_limits():
    _, rows = load_corpus()
    disagreements, outside, same_message = [], 0, 0
    for pattern, src, go_error in rows:
        ours = check_go_regex(pattern)
        if (ours is None) == (go_error is None):
            same_message += ours == go_error
            continue
        if go_error is None and beyond_documented_limits(pattern, ours):
            outside += 1
            continue
        disagreements.append((src, pattern[:80], go_error, ours))
    assert disagreements == []
    # The limits explain only a handful of hostile patterns; messages match nearly always.
    assert outside < 40
    assert same_message / len(rows) > 0.99


def test_every_refusal_carries_gos_own_text_within_the_documented_limits():
    """Go's test tables and a seeded fuzz corpus of the constructs whose errors Go and RE2 word
    or order differently: the same first error, the same words, the user's own text quoted."""
    _, rows = load_corpus()
    with FUZZ.open(encoding="utf-8") as fh:
        header = json.loads(next(fh))
        fuzz = [json.loads(line) for line in fh]
    assert header["go"] == _go_unicode.GO_VERSION and len(fuzz) == header["patterns"]
    refused = [(p, e) for p, _, e in rows if e is not None] + [(p, e) for p, e in fuzz if e is not None]
    assert len(refused) > 12_000
    different = [
        (p[:60], go_error, ours)
        for p, go_error in refused
        if (ours := check_go_regex(p)) != go_error
        and not beyond_documented_limits(p, ours)
        and len(p) <= MAX_PATTERN_LENGTH
    ]
    assert different == []


@pytest.mark.parametrize(
    ("pattern", "go_error"),
    [
        ("x{1001}", "invalid repeat count: `{1001}`"),
        ("?\\p{Foo}", "missing argument to repetition operator: `?`"),  # Go's first error first
        ("é)\\p{Foo}", "unexpected ): `é)\\p{Foo}`"),
        ("a\\x{", "invalid escape sequence: `\\x{`"),  # not "invalid UTF-8"
        ("\\x{110000}", "invalid escape sequence: `\\x{110000`"),
        ("(?P<{1}", "invalid named capture: `(?P<{1}`"),  # the user's text, not our rewrite
        ("[\\x{2}+\\pN", "missing closing ]: `[\\x{2}+\\pN`"),
        ("[a-\\pL]", "invalid escape sequence: `\\p`"),
        ("a(?P<", "invalid or unsupported Perl syntax: `(?P`"),
        ("x{9876543210}", "invalid repeat count: `{9876543210}`"),  # RE2 alone reads it as text
        ("x{1,9876543210}", "invalid repeat count: `{1,9876543210}`"),
        (
            "(" * 1000 + "a" + ")" * 1000,
            "expression nests too deeply: `" + "(" * 1000 + "a" + ")" * 1000 + "`",
        ),
        (r"\p{Old_Italic}", r"invalid character class range: `\p{Old_Italic}`"),  # Go's own quirk
        (r"\p{Zzzz}", r"invalid character class range: `\p{Zzzz}`"),
    ],
)
def test_go_only_refusals_carry_gos_message(pattern, go_error):
    with pytest.raises(GoRegexError) as exc:
        compile_go_regex(pattern)
    assert str(exc.value) == f"error parsing regexp: {go_error}"


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        (r"^\p{Uppercase_Letter}+$", "ÀB", "ab"),
        (r"^\p{uppercase letter}$", "Q", "q"),
        (r"^\p{greek}$", "λ", "l"),
        (r"^\p{ascii}+$", "node-1", "nœud"),
        (r"^\P{Assigned}$", "\U000e0fff", "a"),
        (r"^[\p{Assigned}]$", "a", "\U000e0fff"),
        (r"^x{01}$", "x{01}", "x"),  # a "{" Go does not read as a repeat is literal text
        (r"^x{,3}$", "x{,3}", "xxx"),
    ],
)
def test_gos_loose_class_names_and_literal_braces_match_what_go_matches(pattern, matches, misses):
    assert go_regex_search(pattern, matches)
    assert not go_regex_search(pattern, misses)


def test_a_lone_surrogate_is_refused_with_a_message_not_an_encoder_error():
    with pytest.raises(GoRegexError) as exc:
        compile_go_regex("node-\udb90")
    assert "invalid UTF-8" in str(exc.value) and "\\udb90" in str(exc.value)


def test_pl_repeated_a_thousand_times_is_a_documented_limit_not_a_go_error():
    message = check_go_regex(r"\pL{1000}")
    assert message is not None and "RE2 program budget of 8 MiB" in message
