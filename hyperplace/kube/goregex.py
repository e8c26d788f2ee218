"""Go-compatible regular expressions, compiled with RE2 (never a backtracking engine).

User patterns from HyperNode ``regexMatch`` run only here. RE2 refuses what Go's
``regexp`` refuses (lookarounds, backreferences, possessive quantifiers), and matching
is linear-time, so a hostile pattern cannot stall the webhook or the scheduler.
"""

from __future__ import annotations

import functools

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
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("bad repetition argument", "invalid repeat count"),
    ("invalid repetition size", "invalid repeat count"),
    ("invalid named capture group", "invalid named capture"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("invalid UTF-8", "invalid UTF-8"),
    ("pattern too large", "expression too large"),
]


class GoRegexError(ValueError):
    """A pattern Go's regexp would refuse; ``str(err)`` reads like Go's error."""


def _go_message(pattern: str, raw: str) -> str:
    text = raw.strip()
    if text.startswith("invalid perl operator: (?<"):
        # Go parses every "(?<" as a named group, so a lookbehind fails there as an
        # invalid named capture quoting the text up to the first ">" (or the rest).
        rest = pattern[max(pattern.find("(?<"), 0) :]
        end = rest.find(">")
        return f"error parsing regexp: invalid named capture: `{rest if end < 0 else rest[: end + 1]}`"
    for needle, code in _GO_ERRORS:
        if needle in text:
            detail = text.split(":", 1)[1].strip() if ":" in text else pattern
            if needle == "trailing \\":
                detail = ""  # Go quotes nothing after this one
            return f"error parsing regexp: {code}: `{detail}`"
    return f"error parsing regexp: {text}"


def _go_only_error(pattern: str) -> str | None:
    """What Go's regexp/syntax refuses although RE2 (C++) accepts it, else None.

    Two constructs differ: ``\\C`` (any byte; RE2 has it, Go does not) and capture
    names outside ``[A-Za-z0-9_]`` (RE2 allows Unicode word characters). The scan
    skips escapes, ``\\Q...\\E`` literals and character classes, where neither is
    a construct; every other syntax error is left to RE2.
    """
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt == "C":
                return "error parsing regexp: invalid escape sequence: `\\C`"
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            i += 2
            continue
        if c == "[":
            i += 1
            if pattern[i : i + 1] == "^":
                i += 1
            if pattern[i : i + 1] == "]":  # a leading "]" is a literal
                i += 1
            while i < n and pattern[i] != "]":
                if pattern[i] == "\\":
                    if pattern[i + 1 : i + 2] == "C":
                        return "error parsing regexp: invalid escape sequence: `\\C`"
                    i += 2
                elif pattern.startswith("[:", i) and pattern.find(":]", i + 2) >= 0:
                    i = pattern.find(":]", i + 2) + 2
                else:
                    i += 1
            i += 1
            continue
        if pattern.startswith("(?P<", i) or (
            pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!")
        ):
            start = i + (4 if pattern[i + 2] == "P" else 3)
            end = pattern.find(">", start)
            if end >= 0:
                name = pattern[start:end]
                if not name or not all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in name):
                    return f"error parsing regexp: invalid named capture: `{pattern[i : end + 1]}`"
        i += 1
    return None


@functools.lru_cache(maxsize=4096)
def compile_go_regex(pattern: str) -> re2._Regexp:
    """Compile ``pattern`` with Go (RE2) syntax or raise GoRegexError."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise GoRegexError(
            f"error parsing regexp: expression too large: pattern longer than {MAX_PATTERN_LENGTH}"
        )
    go_only = _go_only_error(pattern)
    if go_only is not None:
        raise GoRegexError(go_only)
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
