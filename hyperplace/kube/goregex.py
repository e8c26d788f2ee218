"""Go-compatible regular expressions, compiled with RE2 (never a backtracking engine).

User patterns from HyperNode ``regexMatch`` run only here. The contract is Go's
``regexp.Compile`` of the Go release Volcano builds with (the version is recorded in
``_go_unicode.GO_VERSION`` and in the parity corpus): a pattern Go accepts is accepted and
matches what Go matches; a pattern Go refuses is refused with Go's message.

RE2 (C++) and Go's ``regexp/syntax`` share a grammar but not every rule, so a pattern is
first scanned here (``translate_go_regex``) for what only Go enforces or spells
differently, then compiled by RE2:

* Go-only refusals: ``\\C``, capture names outside ``[A-Za-z0-9_]``, repeat counts above
  1,000 (``x{1001}``, and ``x{9876543210}``, which RE2 would read as literal text), parse
  trees deeper than 1,000 (``expression nests too deeply``), unknown ``\\p{...}`` names.
* Go's Unicode class names, including its loose spelling (``\\p{Uppercase_Letter}``,
  ``\\p{greek}``, ``\\p{ascii}``, ``\\p{Assigned}``): rewritten to RE2's own name where
  RE2 knows it, otherwise to the explicit code-point ranges Go uses.
* A ``{`` that Go reads as a literal (``x{01}``, ``x{,3}``) is escaped for RE2.

Documented limits (refused with a message saying so, although Go would accept):

* ``MAX_PATTERN_LENGTH`` characters per pattern (4,096);
* ``PROGRAM_BUDGET_BYTES`` for RE2's compiled program (8 MiB): Go counts a Unicode class
  as one instruction, RE2 as a UTF-8 automaton, so ``\\pL{1000}`` fits Go but not RE2;
* Go measures nesting on its parse tree after merging literals and factoring
  alternatives; we measure the same tree without factoring, so for patterns nested more
  than ``NESTING_PARITY_DEPTH`` (900) levels deep the two may differ (both refuse
  beyond 1,000 as Go's own limit).

Patterns are text, so the one thing JSON can carry that is not a character, a lone UTF-16
surrogate, is refused as invalid UTF-8 (Go's wording) instead of failing the encoder.

Compiled patterns, and failures, are kept in a cache bounded both by count and by an
estimate of RE2's memory, so hostile patterns can neither fill memory nor be recompiled
on every request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import re2

from . import _go_unicode

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are returned to the caller, not printed by absl

MAX_PATTERN_LENGTH = 4096
MAX_NESTING_DEPTH = 1000  # Go's maxHeight
NESTING_PARITY_DEPTH = 900
MAX_REPEAT = 1000  # Go's repeat count limit
PROGRAM_BUDGET_BYTES = 8 << 20
_OPTIONS.max_mem = PROGRAM_BUDGET_BYTES

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
]
_TOO_LARGE = "pattern too large"


class GoRegexError(ValueError):
    """A pattern Go's regexp would refuse (or one beyond a documented limit);
    ``str(err)`` reads like Go's error. ``at``: where in the pattern the scan found it, for
    the errors only Go makes (None for the others)."""

    at: int | None = None


def _at(exc: GoRegexError, pos: int) -> GoRegexError:
    if exc.at is None:
        exc.at = pos
    return exc


def _go_message(pattern: str, raw: str, translated: str = "") -> str:
    text = raw.strip()
    if translated and translated != pattern:
        text = text.replace(translated, pattern)  # quote what the user wrote
    if text.startswith("invalid perl operator: (?<"):
        # Go parses every "(?<" as a named group, so a lookbehind fails there as an
        # invalid named capture quoting the text up to the first ">" (or the rest).
        rest = pattern[max(pattern.find("(?<"), 0) :]
        end = rest.find(">")
        return f"error parsing regexp: invalid named capture: `{rest if end < 0 else rest[: end + 1]}`"
    if _TOO_LARGE in text:
        return (
            "error parsing regexp: expression too large: the compiled pattern exceeds this webhook's "
            f"RE2 program budget of {PROGRAM_BUDGET_BYTES >> 20} MiB (a documented limit; Go may accept it)"
        )
    for needle, code in _GO_ERRORS:
        if needle in text:
            detail = text.split(":", 1)[1].strip() if ":" in text else pattern
            if needle == "trailing \\":
                detail = ""  # Go quotes nothing after this one
            return f"error parsing regexp: {code}: `{detail}`"
    return f"error parsing regexp: {text}"


# --- Unicode classes -----------------------------------------------------------------------


def canonical_class_name(name: str) -> str:
    """Go's ``canonicalName``: first letter upper, the rest lower, no ``_``, ``-`` or spaces."""
    out = []
    first = True
    for c in name:
        if c in "_- ":
            continue
        if first:
            out.append(c.upper() if "a" <= c <= "z" else c)
            first = False
        else:
            out.append(c.lower() if "A" <= c <= "Z" else c)
    return "".join(out)


def _parse_ranges(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


_ALIASES = {canonical_class_name(k): v for k, v in _go_unicode.CATEGORY_ALIASES.items()}
_MAX_RUNE = 0x10FFFF


def _go_class(name: str) -> tuple[str, list[tuple[int, int]] | None, bool] | None:
    """Resolve a ``\\p`` name as Go does: (table key, ranges or None for Any, invert)."""
    canon = canonical_class_name(name)
    if canon == "Any":
        return "Any", [(0, _MAX_RUNE)], False
    if canon == "Assigned":
        return "Cn", _parse_ranges(_go_unicode.CATEGORIES["Cn"]), True
    if canon == "Ascii":
        return "ASCII", [(0, 0x7F)], False
    if canon == "Lc":
        canon = "LC"
    for table in (_go_unicode.CATEGORIES, _go_unicode.SCRIPTS):
        if canon in table:
            return canon, _parse_ranges(table[canon]), False
    if canon in _ALIASES:
        key = _ALIASES[canon]
        return key, _parse_ranges(_go_unicode.CATEGORIES[key]), False
    return None


_RE2_KNOWS: dict[str, bool] = {}


def _re2_knows(key: str) -> bool:
    if key not in _RE2_KNOWS:
        try:
            re2.compile(f"\\p{{{key}}}", options=_OPTIONS)
            _RE2_KNOWS[key] = key not in ("LC",)  # RE2's LC differs from Go's (adds no Lt)
        except re2.error:
            _RE2_KNOWS[key] = False
    return _RE2_KNOWS[key]


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, nxt = [], 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX_RUNE:
        out.append((nxt, _MAX_RUNE))
    return out


def _ranges_re2(ranges: list[tuple[int, int]]) -> str:
    # Surrogates cannot be written in RE2 (they are not characters); Go's tables list
    # them only in Cs and its complements, which no UTF-8 text can contain either way.
    parts = []
    for lo, hi in ranges:
        if lo <= 0xDFFF and hi >= 0xD800:
            if lo < 0xD800:
                parts.append((lo, 0xD7FF))
            if hi > 0xDFFF:
                parts.append((0xE000, hi))
        else:
            parts.append((lo, hi))
    return "".join(f"\\x{{{lo:x}}}" if lo == hi else f"\\x{{{lo:x}}}-\\x{{{hi:x}}}" for lo, hi in parts)


def _class_text(name: str, negated: bool, in_class: bool, seq: str) -> str:
    if name.startswith("^"):
        negated, name = not negated, name[1:]
    resolved = _go_class(name)
    if resolved is None:
        raise GoRegexError(f"error parsing regexp: invalid character class range: `{seq}`")
    key, ranges, invert = resolved
    negated ^= invert
    if not invert and _re2_knows(key):
        return f"\\{'P' if negated else 'p'}{{{key}}}"
    assert ranges is not None
    if in_class:
        return _ranges_re2(_complement(ranges) if negated else ranges)
    body = _ranges_re2(ranges)
    if not body:  # Cs: nothing a string can hold
        return "[^\\x{0}-\\x{10ffff}]" if not negated else "[\\x{0}-\\x{10ffff}]"
    return f"[{'^' if negated else ''}{body}]"


def _unicode_class(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """Rewrite the ``\\p``/``\\P`` at ``pattern[i]``; returns (RE2 text, next index)."""
    negated = pattern[i + 1] == "P"
    j = i + 2
    if j >= len(pattern):
        if in_class:  # Go: a class range that cannot be read
            raise GoRegexError(f"error parsing regexp: invalid character class range: `{pattern[i:j]}`")
        return pattern[i:j], j  # RE2 reports the missing name like Go
    if pattern[j] != "{":
        name, end = pattern[j], j + 1
    else:
        close = pattern.find("}", j)
        if close < 0:
            raise GoRegexError(f"error parsing regexp: invalid character class range: `{pattern[i:]}`")
        name, end = pattern[j + 1 : close], close + 1
    return _class_text(name, negated, in_class, pattern[i:end]), end


# --- the scan ------------------------------------------------------------------------------


def _parse_int(s: str, i: int) -> tuple[int, int] | None:
    """Go's parseInt: digits without a leading zero; -1 when 8+ digits (overflow)."""
    j = i
    while j < len(s) and s[j].isascii() and s[j].isdigit():
        j += 1
    if j == i or (j - i >= 2 and s[i] == "0"):
        return None
    digits = s[i:j]
    return (int(digits) if len(digits) < 9 else -1), j


def _parse_repeat(s: str, i: int) -> tuple[int, int, int] | None:
    """Go's parseRepeat at ``s[i] == '{'``: (min, max, end) or None when ``{`` is literal."""
    first = _parse_int(s, i + 1)
    if first is None:
        return None
    lo, j = first
    hi = lo
    if j < len(s) and s[j] == ",":
        j += 1
        if j < len(s) and s[j] == "}":
            hi = -1
        else:
            second = _parse_int(s, j)
            if second is None:
                return None
            hi, j = second
            if hi < 0:
                lo = -1  # Go: a maximum too big to parse makes the minimum invalid
    if j >= len(s) or s[j] != "}":
        return None
    return lo, hi, j + 1


@dataclass
class _Item:
    height: int
    kind: str  # "lit", "leaf", "concat", "alt", "node"
    runes: int = 1


def _join(items: list[_Item], kind: str) -> _Item:
    """Go's collapse: a concat/alternate node over ``items``, hoisting children of the same op."""
    if not items:
        return _Item(1, "leaf")
    if len(items) == 1:
        return items[0]
    h = max(it.height - 1 if it.kind == kind else it.height for it in items)
    return _Item(1 + h, kind)


class _Tree:
    """Heights of the parse tree Go builds, as far as nesting goes."""

    def __init__(self) -> None:
        self.stack: list[tuple[bool, list[_Item], list[_Item]]] = []  # (capture, branches, items)
        self.branches: list[_Item] = []
        self.items: list[_Item] = []
        self.max = 1

    def leaf(self, literal: bool) -> None:
        if literal and self.items and self.items[-1].kind == "lit":
            self.items[-1].runes += 1  # Go merges adjacent literals into one node
            return
        self.items.append(_Item(1, "lit" if literal else "leaf"))

    def repeat(self) -> None:
        if self.items:
            it = self.items[-1]
            if it.kind == "lit" and it.runes > 1:
                # A repeat takes only the last character off a merged literal.
                it.runes -= 1
                self.items.append(_Item(2, "node"))
                self.max = max(self.max, 2)
                return
            self.items[-1] = _Item(it.height + 1, "node")
            self.max = max(self.max, it.height + 1)

    def bar(self) -> None:
        self.branches.append(_join(self.items, "concat"))
        self.items = []

    def open(self, capture: bool) -> None:
        self.stack.append((capture, self.branches, self.items))
        self.branches, self.items = [], []

    def close(self) -> None:
        if not self.stack:
            return  # RE2 reports the unexpected ")"
        self.bar()
        inner = _join(self.branches, "alt")
        capture, self.branches, self.items = self.stack.pop()
        if capture:
            inner = _Item(inner.height + 1, "node")
        self.items.append(inner)
        self.max = max(self.max, inner.height)

    def height(self) -> int:
        while self.stack:
            self.close()
        self.bar()
        return max(self.max, _join(self.branches, "alt").height)


def _unhex(c: str) -> int:
    return int(c, 16) if len(c) == 1 and c in "0123456789abcdefABCDEF" else -1


def _check_hex_escape(pattern: str, i: int) -> None:
    """Go's reading of the ``\\x`` escape at ``pattern[i]``: two hex digits, or hex digits in
    braces up to U+10FFFF. A bad one is refused quoting exactly what Go consumed (RE2 words
    several of these differently, e.g. a trailing ``\\x{`` as invalid UTF-8)."""
    n, t = len(pattern), i + 2
    ok = False
    if t < n:
        c, t = pattern[t], t + 1
        if c == "{":
            digits, value = 0, 0
            while t < n:
                c, t = pattern[t], t + 1
                if c == "}":
                    ok = digits > 0
                    break
                v = _unhex(c)
                value = value * 16 + v
                if v < 0 or value > _MAX_RUNE:
                    break
                digits += 1
        else:
            y = _unhex(pattern[t]) if t < n else -1
            t = min(t + 1, n)
            ok = _unhex(c) >= 0 and y >= 0
    if not ok:
        raise GoRegexError(f"error parsing regexp: invalid escape sequence: `{pattern[i:t]}`")


def translate_go_regex(pattern: str, info: dict[str, int] | None = None) -> str:
    """The RE2 pattern that accepts and matches exactly what Go's ``pattern`` does.

    Raises GoRegexError for what only Go refuses and for the documented limits; every
    other syntax error is left for RE2 to report. ``info`` receives where an unclosed
    character class starts (``unclosed_class``), for Go's wording of RE2's error.
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise GoRegexError(
            f"error parsing regexp: expression too large: pattern is {len(pattern)} characters; "
            f"this webhook's limit is {MAX_PATTERN_LENGTH} (a documented limit; Go may accept it)"
        )
    for ch in pattern:
        if "\ud800" <= ch <= "\udfff":
            raise GoRegexError(
                f"error parsing regexp: invalid UTF-8: the pattern contains a lone UTF-16 surrogate "
                f"(\\u{ord(ch):04x}), which is not a character"
            )
    out: list[str] = []
    tree = _Tree()
    i, n = 0, len(pattern)
    # Each Go-only error is raised with where its construct starts (see _earlier_error).
    try:
        while i < n:
            c = pattern[i]
            if c == "\\":
                nxt = pattern[i + 1 : i + 2]
                if nxt == "C":
                    raise GoRegexError("error parsing regexp: invalid escape sequence: `\\C`")
                if nxt == "Q":
                    end = pattern.find("\\E", i + 2)
                    stop = n if end < 0 else end + 2
                    out.append(pattern[i:stop])
                    tree.leaf(True)
                    i = stop
                    continue
                if nxt in ("p", "P"):
                    text, i = _unicode_class(pattern, i, in_class=False)
                    out.append(text)
                    tree.leaf(False)
                    continue
                if nxt == "x":
                    _check_hex_escape(pattern, i)
                if nxt == "x" and pattern[i + 2 : i + 3] == "{":
                    close = pattern.find("}", i)
                    stop = n if close < 0 else close + 1
                else:
                    stop = i + 2
                out.append(pattern[i:stop])
                tree.leaf(nxt not in "dDsSwWbBAzpP" or nxt == "")
                i = stop
                continue
            if c == "[":
                j = i + 1
                buf = ["["]
                if pattern[j : j + 1] == "^":
                    buf.append("^")
                    j += 1
                # Go reads "x-y" as a range of two single characters: after a character
                # ("lo") a "-" not before "]" makes the next item its upper end ("dash"),
                # and a class escape there (\\p, \\d, ...) is an invalid escape.
                state = "none"
                if pattern[j : j + 1] == "]":  # a leading "]" is a literal
                    buf.append("]")
                    j += 1
                    state = "lo"
                while j < n and pattern[j] != "]":
                    if pattern[j] == "\\":
                        nxt = pattern[j + 1 : j + 2]
                        if nxt == "C":
                            raise _at(GoRegexError("error parsing regexp: invalid escape sequence: `\\C`"), j)
                        if state == "dash" and nxt and nxt in "pPdDsSwW":
                            raise _at(
                                GoRegexError(
                                    f"error parsing regexp: invalid escape sequence: `{pattern[j : j + 2]}`"
                                ),
                                j,
                            )
                        if nxt in ("p", "P"):
                            try:
                                text, j = _unicode_class(pattern, j, in_class=True)
                            except GoRegexError as exc:
                                raise _at(exc, j) from None
                            buf.append(text)
                            state = "none"
                            continue
                        if nxt == "x":
                            try:
                                _check_hex_escape(pattern, j)
                            except GoRegexError as exc:
                                raise _at(exc, j) from None
                        if nxt == "x" and pattern[j + 2 : j + 3] == "{":
                            close = pattern.find("}", j)
                            stop = n if close < 0 else close + 1
                        else:
                            stop = j + 2
                        buf.append(pattern[j:stop])
                        j = stop
                        state = "none" if state == "dash" or (nxt and nxt in "dDsSwW") else "lo"
                    elif pattern.startswith("[:", j) and pattern.find(":]", j + 2) >= 0:
                        stop = pattern.find(":]", j + 2) + 2
                        buf.append(pattern[j:stop])
                        j = stop
                        state = "none"
                    else:
                        if state == "dash":
                            state = "none"
                        elif pattern[j] == "-" and state == "lo" and pattern[j + 1 : j + 2] not in ("", "]"):
                            state = "dash"
                        else:
                            state = "lo"
                        buf.append(pattern[j])
                        j += 1
                if j < n:
                    buf.append("]")
                    j += 1
                elif info is not None:
                    info.setdefault("unclosed_class", i)  # Go quotes it from here on
                out.append("".join(buf))
                tree.leaf(False)
                i = j
                continue
            if c == "(":
                if pattern[i:] in ("(?P<", "(?<"):
                    # Go takes a group name only with something after "<": a flag error here.
                    raise GoRegexError(
                        f"error parsing regexp: invalid or unsupported Perl syntax: `{pattern[i:-1]}`"
                    )
                if pattern.startswith(("(?P<", "(?<"), i):
                    # Go reads every "(?<" as a named group, a lookbehind "(?<=" too: a name
                    # up to the first ">", or, without one, the rest of the pattern.
                    start = i + (4 if pattern[i + 2] == "P" else 3)
                    end = pattern.find(">", start)
                    if end < 0:
                        raise GoRegexError(f"error parsing regexp: invalid named capture: `{pattern[i:]}`")
                    name = pattern[start:end]
                    if not name or not all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in name):
                        raise GoRegexError(
                            f"error parsing regexp: invalid named capture: `{pattern[i : end + 1]}`"
                        )
                    tree.open(capture=True)
                elif pattern.startswith("(?", i):
                    # Flags: "(?i)" opens nothing; "(?i:" and "(?:" group without capturing.
                    j = i + 2
                    while j < n and pattern[j] not in ":)":
                        j += 1
                    if pattern[j : j + 1] == ":":
                        tree.open(capture=False)
                    out.append(pattern[i : j + 1])
                    i = j + 1
                    continue
                else:
                    tree.open(capture=True)
                out.append(c)
                i += 1
                continue
            if c == ")":
                tree.close()
            elif c == "|":
                tree.bar()
            elif c in "*+?":
                tree.repeat()
            elif c == "{":
                rep = _parse_repeat(pattern, i)
                if rep is None:
                    out.append("\\{")  # Go reads it as a literal "{"; so must RE2
                    tree.leaf(True)
                    i += 1
                    continue
                lo, hi, end = rep
                if lo < 0 or lo > MAX_REPEAT or hi > MAX_REPEAT or (hi >= 0 and lo > hi):
                    raise GoRegexError(f"error parsing regexp: invalid repeat count: `{pattern[i:end]}`")
                tree.repeat()
                out.append(pattern[i:end])
                i = end
                continue
            else:
                tree.leaf(c not in ".^$")
            out.append(c)
            i += 1
    except GoRegexError as exc:
        raise _at(exc, i) from None
    if tree.height() > MAX_NESTING_DEPTH:
        raise GoRegexError(f"error parsing regexp: expression nests too deeply: `{pattern}`")
    return "".join(out)


def check_go_regex(pattern: str) -> str | None:
    """Go's error for ``pattern`` (or a documented limit's), or None when it compiles.

    Compiles without caching: the webhook runs this in a separate process.
    """
    try:
        _compile(pattern)
    except GoRegexError as exc:
        return str(exc)
    return None


_TRUNCATION_ARTIFACTS = ("missing closing )", "missing closing ]")


def _earlier_error(pattern: str, at: int) -> GoRegexError | None:
    """The error Go reports first when ``pattern[:at]`` (before a construct only Go refuses)
    already holds one: Go parses left to right and stops at its first error, while the scan
    finds Go-only errors before RE2 sees the pattern. An unclosed group or class is no such
    error (it may close after ``at``; Go reports those at the end)."""
    prefix = pattern[:at]
    if not prefix:
        return None
    info: dict[str, int] = {}
    try:
        translated = translate_go_regex(prefix, info)
        re2.compile(translated, options=_OPTIONS)
    except GoRegexError:
        return None
    except re2.error as exc:
        raw = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        message = _original_detail(pattern, _go_message(prefix, raw, translated), info)
        if any(a in message for a in _TRUNCATION_ARTIFACTS) or "expression too large" in message:
            return None
        if "unexpected )" in message and message.endswith(f"`{prefix}`"):  # Go quotes it all
            message = message[: -len(prefix) - 2] + f"`{pattern}`"
        return GoRegexError(message)
    return None


def _original_detail(pattern: str, message: str, info: dict[str, int]) -> str:
    """``message`` quoting the user's text where RE2 quoted our rewrite of it: a named group
    without ``>`` (Go quotes from ``(?P<``/``(?<`` to the end) and an unclosed class (Go
    quotes from ``[`` to the end)."""
    head, _, detail = message.partition(": `")
    if "invalid named capture" in head and ">" not in detail:
        starts = [k for k in range(len(pattern)) if pattern.startswith(("(?P<", "(?<"), k)]
        open_ended = [k for k in starts if pattern.find(">", k) < 0]
        if open_ended:
            return f"{head}: `{pattern[open_ended[0] :]}`"
    if "missing closing ]" in head and "unclosed_class" in info:
        return f"{head}: `{pattern[info['unclosed_class'] :]}`"
    return message


def _compile(pattern: str) -> re2._Regexp:
    info: dict[str, int] = {}
    try:
        translated = translate_go_regex(pattern, info)
    except GoRegexError as exc:
        earlier = _earlier_error(pattern, exc.at) if exc.at else None
        raise (earlier or exc) from None
    try:
        return re2.compile(translated, options=_OPTIONS)
    except re2.error as exc:
        raw = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise GoRegexError(_original_detail(pattern, _go_message(pattern, raw, translated), info)) from None


# --- the cache -----------------------------------------------------------------------------

CACHE_MAX_ENTRIES = 4096
CACHE_MAX_BYTES = 64 << 20
# RE2 keeps its program plus DFA state caches that grow while matching, up to max_mem;
# an instruction is about 16 bytes, and we budget for the DFAs at 4x the program.
_BYTES_PER_INSTRUCTION = 80
_ENTRY_OVERHEAD = 512


class RegexCache:
    """LRU cache of compiled patterns and of refusals, bounded by entries and bytes."""

    def __init__(self, max_entries: int = CACHE_MAX_ENTRIES, max_bytes: int = CACHE_MAX_BYTES):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[re2._Regexp | GoRegexError, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, pattern: str) -> re2._Regexp:
        """The compiled pattern; raises the (remembered) GoRegexError."""
        with self._lock:
            hit = self._items.get(pattern)
            if hit is not None:
                self._items.move_to_end(pattern)
        if hit is None:
            value: re2._Regexp | GoRegexError
            try:
                value = _compile(pattern)
                cost = _ENTRY_OVERHEAD + 2 * len(pattern) + _BYTES_PER_INSTRUCTION * value.programsize
            except GoRegexError as exc:
                value = exc
                cost = _ENTRY_OVERHEAD + 2 * len(pattern) + 2 * len(str(exc))
            self._put(pattern, value, cost)
        else:
            value = hit[0]
        if isinstance(value, GoRegexError):
            raise GoRegexError(str(value))
        return value

    def _put(self, pattern: str, value: re2._Regexp | GoRegexError, cost: int) -> None:
        if cost > self.max_bytes:
            return  # used once, never kept
        with self._lock:
            old = self._items.pop(pattern, None)
            if old is not None:
                self.bytes -= old[1]
            self._items[pattern] = (value, cost)
            self.bytes += cost
            while len(self._items) > self.max_entries or self.bytes > self.max_bytes:
                _, (_, c) = self._items.popitem(last=False)
                self.bytes -= c

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()
            self.bytes = 0


CACHE = RegexCache()


def compile_go_regex(pattern: str) -> re2._Regexp:
    """Compile ``pattern`` with Go (RE2) syntax or raise GoRegexError (cached both ways)."""
    return CACHE.get(pattern)


def go_regex_search(pattern: str, text: str) -> bool:
    """Unanchored match (Go's ``MatchString``); an invalid pattern matches nothing."""
    try:
        return compile_go_regex(pattern).search(text) is not None
    except GoRegexError:
        return False
