"""HyperNode regexMatch patterns are judged by Go's regexp/syntax rules (RE2), never by
Python's ``re``: what Go accepts is admitted, what Go refuses is refused with Go's text.

Expectations come from Go's regexp/syntax parser (Go 1.22+, which accepts ``(?<name>x)``).
"""

from __future__ import annotations

import pytest

from hyperplace.kube.goregex import GoRegexError, compile_go_regex
from webhooks.admission import admit

from .builders import hypernode, member

ACCEPTED = [
    "^node-[0-9]+$",
    "(?i)gpu",
    r"\d{2,3}",
    "[[:alpha:]]",
    r"\pL",
    r"\p{Greek}",
    r"\PL",
    "(?<name>x)",  # Go 1.22 added this form
    "(?P<name>x)",
    "(?P<a>x)(?P<a>y)",  # Go allows repeated names
    r"\Q.*+?\E",
    r"\\Z",  # a literal backslash then Z
    r"\(?P=",  # a literal "(" made optional, then "P="
    "(?U)a+",
    "(?s).",
    r"\z",
    r"\x{10FFFF}",
    r"\0",
    "x{,3}",  # not a repeat in Go: literal text
    "[]a]",
    "a{1000}",
    "node-é",
]

REFUSED = {
    "(?=x)": "invalid or unsupported Perl syntax: `(?=`",
    "(?!x)": "invalid or unsupported Perl syntax: `(?!`",
    "(?<=a)b": "invalid named capture: `(?<=a)b`",
    "(?<!a)b": "invalid named capture: `(?<!a)b`",
    r"(a)\1": r"invalid escape sequence: `\1`",
    "(?P<n>a)(?P=n)": "invalid or unsupported Perl syntax: `(?P`",
    "a++": "invalid nested repetition operator: `++`",
    "a**": "invalid nested repetition operator: `**`",
    "**": "missing argument to repetition operator: `*`",
    "a{1001}": "invalid repeat count: `{1001}`",
    r"\Z": r"invalid escape sequence: `\Z`",
    r"\C": r"invalid escape sequence: `\C`",
    "(?P<é>x)": "invalid named capture: `(?P<é>`",
    "(?<a-b>x)": "invalid named capture: `(?<a-b>`",
    "(?>a)": "invalid or unsupported Perl syntax: `(?>`",
    "(": "missing closing ): `(`",
    ")": "unexpected ): `)`",
    "[a": "missing closing ]: `[a`",
    "[z-a]": "invalid character class range: `z-a`",
    "[[:foo:]]": "invalid character class range: `[:foo:]`",
    "x\\": "trailing backslash at end of expression: ``",
}


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_go_accepts(pattern):
    compile_go_regex(pattern)
    hn = hypernode("rack", 1)
    hn["spec"]["members"] = [member("Node", {"regexMatch": {"pattern": pattern}})]
    assert admit(hn).allowed


@pytest.mark.parametrize(("pattern", "go_error"), sorted(REFUSED.items()))
def test_go_refuses_with_gos_message(pattern, go_error):
    with pytest.raises(GoRegexError) as exc:
        compile_go_regex(pattern)
    assert str(exc.value) == f"error parsing regexp: {go_error}"
    hn = hypernode("rack", 1)
    hn["spec"]["members"] = [member("Node", {"regexMatch": {"pattern": pattern}})]
    assert admit(hn).messages == [
        f"spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid: error parsing regexp: {go_error}"
    ]


def test_catastrophic_backtracking_pattern_is_linear_time():
    # Exponential in a backtracking engine; RE2 matches it in linear time.
    rx = compile_go_regex("^(a+)+$")
    assert rx.search("a" * 50_000 + "b") is None


def test_no_user_regex_reaches_pythons_re(monkeypatch):
    import re

    calls = []
    real_compile = re.compile

    def spy(pattern, *a, **k):
        calls.append(pattern)
        return real_compile(pattern, *a, **k)

    monkeypatch.setattr(re, "compile", spy)
    monkeypatch.setattr(re, "search", lambda *a, **k: calls.append(a[0]))
    monkeypatch.setattr(re, "match", lambda *a, **k: calls.append(a[0]))
    monkeypatch.setattr(re, "fullmatch", lambda *a, **k: calls.append(a[0]))
    hn = hypernode("rack", 1)
    hn["spec"]["members"] = [member("Node", {"regexMatch": {"pattern": "^user-[a-z]{3}(?i)Q$"}})]
    admit(hn)
    assert "^user-[a-z]{3}(?i)Q$" not in calls
