"""Go-compatible regular expressions, compiled with RE2 (never a backtracking engine).

User patterns from HyperNode ``regexMatch`` run only here. RE2 refuses what Go's
``regexp`` refuses (lookarounds, backreferences, possessive quantifiers), and matching
is linear-time, so a hostile pattern cannot stall the webhook or the scheduler.
"""

from __future__ import annotations

import functools
import re

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are returned to the caller, not printed by absl
# Go's regexp caps a program at roughly this size; RE2's default budget is similar.
_OPTIONS.max_mem = 8 << 20

MAX_PATTERN_LENGTH = 4096

# RE2 (C++) error texts -> Go's regexp/syntax error codes, so messages match Volcano's.
_GO_ERRORS = [
    ("missing )", "missing closing )"),
    ("unexpected )", "unexpected )"),
    ("missing ]", "missing closing ]"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("missing argument to repetition operator", "missing argument to repetition operator"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("bad repetition argument", "invalid repeat count"),
    ("invalid named capture group", "invalid named capture"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("invalid UTF-8", "invalid UTF-8"),
    ("pattern too large", "expression too large"),
]


class GoRegexError(ValueError):
    """A pattern Go's regexp would refuse; ``str(err)`` reads like Go's error."""


def _go_message(pattern: str, raw: str) -> str:
    text = raw.strip()
    for needle, code in _GO_ERRORS:
        if needle in text:
            detail = text.split(":", 1)[1].strip() if ":" in text else pattern
            return f"error parsing regexp: {code}: `{detail}`"
    return f"error parsing regexp: {text}"


@functools.lru_cache(maxsize=4096)
def compile_go_regex(pattern: str) -> re2._Regexp:
    """Compile ``pattern`` with Go (RE2) syntax or raise GoRegexError."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise GoRegexError(
            f"error parsing regexp: expression too large: pattern longer than {MAX_PATTERN_LENGTH}"
        )
    # RE2's Python wrapper accepts a few Python-only constructs through its fallback
    # path; Go rejects \Z and (?P=name) and so do we.
    if re.search(r"\\Z|\(\?P=", pattern):
        raise GoRegexError(f"error parsing regexp: invalid escape sequence: `{pattern}`")
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        raw = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise GoRegexError(_go_message(pattern, raw)) from None


def go_regex_search(pattern: str, text: str) -> bool:
    """Unanchored match (Go's ``MatchString``); an invalid pattern matches nothing."""
    try:
        return compile_go_regex(pattern).search(text) is not None
    except GoRegexError:
        return False
