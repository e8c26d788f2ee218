r"""Regenerate Go's regexp verdicts and Unicode class tables from the local Go toolchain.

    python hack/gen_go_regex.py [--go /usr/local/go/bin/go]

Writes three files, all committed:

* ``hyperplace/kube/_go_unicode.py``: the tables Go's ``\p{...}`` resolves names in
  (``unicode.Categories``, ``unicode.Scripts``, ``unicode.CategoryAliases``) with their
  code points, so ``hyperplace.kube.goregex`` accepts exactly Go's class names, including
  its loose spellings (``\p{uppercase letter}``), and matches what Go matches.
* ``tests/webhooks/fixtures/go_regex_corpus.jsonl``: every string literal of Go's own
  regexp test files (``regexp/syntax/*_test.go``, ``regexp/*_test.go``), the patterns of
  ``regexp/testdata`` (the Fowler ``.dat`` files, ``re2-search.txt``,
  ``re2-exhaustive.txt.bz2``) and the hostile edge cases below, each with Go's
  ``regexp.Compile`` verdict. ``tests/webhooks/test_go_regex_parity.py`` compares ours.
* ``tests/webhooks/fixtures/go_regex_fuzz.jsonl``: 12,000 seeded strings of the constructs
  whose errors Go and RE2 word or order differently (``FUZZ_TOKENS``), with Go's verdict and
  error text; the parity test requires the same text for every one within the limits.

Needs Go (any version Volcano builds with; the files record which). Without Go it exits
with a message and changes nothing. The Go helper is written to a temporary directory and
never committed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNICODE_OUT = ROOT / "hyperplace" / "kube" / "_go_unicode.py"
CORPUS_OUT = ROOT / "tests" / "webhooks" / "fixtures" / "go_regex_corpus.jsonl"
FUZZ_OUT = ROOT / "tests" / "webhooks" / "fixtures" / "go_regex_fuzz.jsonl"
FUZZ_SEED, FUZZ_PATTERNS = 21, 12000
# Pieces the fuzz corpus strings together: the constructs whose errors Go and RE2 word or
# order differently (escapes, classes, named groups, repeats), plus plain text.
FUZZ_TOKENS = [
    "a", "b", ".", "*", "+", "?", "|", "(", ")", "(?:", "(?i)", "(?P<n>", "(?<n>", "(?P<", "(?P=n)",
    "[", "]", "[^", "[a-z]", "[:alpha:]", "[[:word:]]", "[[:foo:]]", "\\", "\\x", "\\x{", "\\x{41}",
    "\\x{110000}", "\\x4", "\\p", "\\p{", "\\pL", "\\p{Greek}", "\\p{Foo}", "\\P{L}", "\\pN", "\\C",
    "\\Q", "\\E", "\\z", "\\Z", "\\b", "\\B", "\\A", "\\d", "\\8", "\\1", "{", "}", "{2}", "{2,}",
    "{,3}", "{3,2}", "{1001}", "{1,1001}", "^", "$", "-", "(?", "(?=", "(?!", "(?<=", "(?s", "(?-",
    "(?i-s:", "\\n", "\\t", "\\a", "\\f", "\\v", "\\0", "\\07", "\\_", "é", "**", "++", "??",
    "*?", "+?", "{2}?", "{2}{3}", ")(",
]  # fmt: skip

GO_HELPER = r"""package main

import (
	"bufio"
	"compress/bzip2"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

func emit(w *bufio.Writer, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
	w.WriteByte('\n')
}

type lit struct {
	P   string `json:"p"`
	Src string `json:"src"`
}

func main() {
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	switch os.Args[1] {
	case "judge":
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			var p string
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				panic(err)
			}
			_, err := regexp.Compile(p)
			if err != nil {
				emit(w, map[string]any{"ok": false, "err": err.Error()})
			} else {
				emit(w, map[string]any{"ok": true})
			}
		}
	case "extract":
		for _, f := range os.Args[2:] {
			base := f[strings.LastIndex(f, "/")+1:]
			switch {
			case strings.HasSuffix(f, ".go"):
				fs := token.NewFileSet()
				file, err := parser.ParseFile(fs, f, nil, 0)
				if err != nil {
					panic(err)
				}
				ast.Inspect(file, func(n ast.Node) bool {
					if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
						if s, err := strconv.Unquote(bl.Value); err == nil && utf8.ValidString(s) {
							emit(w, lit{s, base})
						}
					}
					return true
				})
			case strings.HasSuffix(f, ".dat"):
				data, _ := os.ReadFile(f)
				for _, line := range strings.Split(string(data), "\n") {
					fields := strings.FieldsFunc(line, func(r rune) bool { return r == '\t' })
					if len(fields) < 2 || strings.HasPrefix(line, "#") {
						continue
					}
					p := fields[1]
					if strings.Contains(fields[0], "$") {
						if q, err := strconv.Unquote(`"` + p + `"`); err == nil {
							p = q
						}
					}
					if utf8.ValidString(p) {
						emit(w, lit{p, base})
					}
				}
			case strings.HasSuffix(f, ".txt") || strings.HasSuffix(f, ".bz2"):
				fh, _ := os.Open(f)
				var r io.Reader = fh
				if strings.HasSuffix(f, ".bz2") {
					r = bzip2.NewReader(fh)
				}
				sc := bufio.NewScanner(r)
				sc.Buffer(make([]byte, 1<<20), 1<<26)
				inRegexps := false
				seen := map[string]bool{}
				for sc.Scan() {
					line := sc.Text()
					switch line {
					case "regexps":
						inRegexps = true
						continue
					case "strings":
						inRegexps = false
						continue
					}
					if !inRegexps {
						continue
					}
					if s, err := strconv.Unquote(line); err == nil && utf8.ValidString(s) && !seen[s] {
						seen[s] = true
						emit(w, lit{s, base})
					}
				}
			}
		}
	case "unicode":
		// The tables Go's \p{...} looks names up in, with the code points each matches.
		dump := func(kind, k string, t *unicode.RangeTable) {
			var ranges [][2]rune
			lo, prev := rune(-1), rune(-2)
			for r := rune(0); r <= unicode.MaxRune; r++ {
				if unicode.Is(t, r) {
					if lo < 0 {
						lo = r
					}
					prev = r
				} else if lo >= 0 {
					ranges = append(ranges, [2]rune{lo, prev})
					lo = -1
				}
			}
			if lo >= 0 {
				ranges = append(ranges, [2]rune{lo, prev})
			}
			emit(w, map[string]any{"kind": kind, "name": k, "ranges": ranges})
		}
		for k, t := range unicode.Categories {
			dump("category", k, t)
		}
		for k, t := range unicode.Scripts {
			dump("script", k, t)
		}
		for k, v := range unicode.CategoryAliases {
			emit(w, map[string]any{"kind": "alias", "name": k, "target": v})
		}
	default:
		fmt.Fprintln(os.Stderr, "usage")
		os.Exit(2)
	}
}
"""


def hostile_patterns() -> list[str]:
    """Edge cases around Go's limits that its own tests do not cover."""
    out: list[str] = []
    for n in (10, 999, 1000, 1001):
        out += [
            "(" * n + "a" + ")" * n,
            "(?:" * n + "a" + ")" * n,
            "(?:a" * n + ")" * n,
            "(a|" * n + "b" + ")" * n,
            "(?:a|" * n + "b" + ")" * n,
            "(?:a|(?:b" * (n // 2) + ")" * (n // 2) * 2,
            "(a*" * n + ")" * n,
            "(?:(?:a)*)" * 2 + "(" * n + ")" * n,
            "a" + "(?:b*)" * n,
            "(?:" * n + "a*" + ")*" * n,
            "(?:" * n + "ab" + ")+" * n,
            "(?:" * n + "[ab]" + ")?" * n,
            "(?i)" + "(" * n + "k" + ")" * n,
            "x" + "(?:y|z)" * n,
        ]
    for n in (332, 333, 334, 498, 499, 500, 501, 502, 998, 999):
        # Within the 4,096-character limit, around Go's height of 1,000.
        out += ["(" * n + "a" + ")*" * n, "(a" * n + ")" * n, "(a|" * n + ")" * n, "(?:a|b" * n + ")+" * n]
        out += ["(" * n + "ab|c" + ")" * n, "(x" * n + "|y)" * n, "(" * n + "[a]" + ")" * n]
    for count in ("0", "1", "999", "1000", "1001", "01", "00", "9876543210", "99999999", "100000000"):
        out += [f"x{{{count}}}", f"x{{{count},}}", f"x{{1,{count}}}", f"x{{{count},2}}", f"{{{count}}}"]
    out += ["x{,3}", "x{", "x{1", "x{1,", "x{a}", "x{1,2,3}", "x{ 1}", "(a{10}){100}", "(a{10}){101}"]
    out += ["((a{10}){10}){10}", "((a{10}){10}){11}", "(?:a{1000})", "(?:a{1000}){2}", "a{2}{2}", "a{2}*"]
    names = [
        "L",
        "Lu",
        "Greek",
        "greek",
        "GREEK",
        "Uppercase_Letter",
        "uppercase letter",
        "Uppercase-Letter",
        "uppercaseletter",
        "Letter",
        "letter",
        "ascii",
        "ASCII",
        "Ascii",
        "Assigned",
        "assigned",
        "Any",
        "any",
        "LC",
        "lc",
        "Lc",
        "Cn",
        "Cs",
        "Co",
        "Old_Italic",
        "Olditalic",
        "Han",
        "han",
        "Latin",
        "Nd",
        "nd",
        "Decimal_Number",
        "digit",
        "Zzzz",
        "",
        "^",
        "^Greek",
        "^greek",
        " Greek",
        "Gre ek",
        "_Greek_",
        "Kawi",
        "Nag_Mundari",
        "Nagmundari",
        "Cased_Letter",
        "cased letter",
        "Punctuation",
        "punct",
        "Other",
        "other",
        "Unassigned",
        "Surrogate",
        "Private_Use",
        "Format",
        "Control",
        "cntrl",
        "Mark",
        "Combining_Mark",
        "Symbol",
        "Math_Symbol",
        "Separator",
        "Space_Separator",
        "Number",
        "Letter_Number",
        "Other_Letter",
        "Titlecase_Letter",
        "Modifier_Letter",
        "L&",
        "Latn",
        "Grek",
        "Common",
        "Inherited",
        "Zyyy",
    ]
    for name in names:
        out += [
            f"\\p{{{name}}}",
            f"\\P{{{name}}}",
            f"[\\p{{{name}}}x]",
            f"[^\\P{{{name}}}]",
            f"(?i)\\p{{{name}}}",
        ]
    out += ["\\pL", "\\pl", "\\pN", "\\pZ", "\\pé", "\\p", "\\p{", "\\p{L", "\\P", "\\pLL", "[\\pL-z]"]
    out += ["\\pL{1000}", "\\pL{300}", "[\\p{Han}\\pL]{500}", "(?i)\\pL{200}", "\\p{Greek}{1000}"]
    out += [
        "\\C",
        "[\\C]",
        "(?P<é>x)",
        "(?<a-b>x)",
        "(?P<a>x)(?P<a>y)",
        "(?<n>x)",
        "(?P=n)",
        "(?<=a)",
        "(?<!a)",
    ]
    out += ["(?=a)", "(?!a)", "(?>a)", "a++", "a*+", "a?+", "(?i)(?U)(?s)(?m)a", "(?z)a", "(?i-s:a)", "(?-)a"]
    out += [
        "\\Q.*\\E",
        "\\Qab",
        "\\Q\\E*",
        "\\z",
        "\\Z",
        "\\A",
        "\\b",
        "\\B",
        "\\G",
        "\\0",
        "\\07",
        "\\08",
        "\\8",
    ]
    out += [
        "\\x{10FFFF}",
        "\\x{110000}",
        "\\x{D800}",
        "\\x{}",
        "\\x4",
        "\\x41",
        "\\u0041",
        "\\cA",
        "\\e",
        "\\N{x}",
    ]
    out += [
        "[[:alpha:]]",
        "[[:foo:]]",
        "[[:^alpha:]]",
        "[[=a=]]",
        "[[.a.]]",
        "[]a]",
        "[^]a]",
        "[]",
        "[^]",
        "[a-]",
    ]
    out += [
        "[z-a]",
        "[a-\\d]",
        "[\\d-z]",
        "x\\",
        "(",
        ")",
        "(()",
        "())",
        "|",
        "||",
        "a|*",
        "*",
        "(*)",
        "(?:)",
    ]
    return list(dict.fromkeys(out))


def _go(go: str, workdir: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = dict(os.environ, GOCACHE=str(workdir / "cache"), GOFLAGS="", GO111MODULE="off")
    exe = workdir / "goregex-helper"
    if not exe.exists():
        (workdir / "main.go").write_text(GO_HELPER)
        subprocess.run([go, "build", "-o", str(exe), "main.go"], cwd=workdir, env=env, check=True)
    return subprocess.run([str(exe), *args], input=stdin, stdout=subprocess.PIPE, check=True).stdout


def _ranges_text(ranges: list[list[int]]) -> str:
    return ",".join(f"{lo:x}-{hi:x}" if lo != hi else f"{lo:x}" for lo, hi in ranges)


def write_unicode(go: str, workdir: Path, version: str) -> None:
    rows = [json.loads(line) for line in _go(go, workdir, "unicode").splitlines()]
    cats = {r["name"]: _ranges_text(r["ranges"]) for r in rows if r["kind"] == "category"}
    scripts = {r["name"]: _ranges_text(r["ranges"]) for r in rows if r["kind"] == "script"}
    aliases = {r["name"]: r["target"] for r in rows if r["kind"] == "alias"}
    lines = [
        f'"""Go {version}\'s Unicode tables for ``\\\\p{{...}}``; generated by hack/gen_go_regex.py, do not edit.',
        "",
        "Ranges are comma-separated hexadecimal code points, ``lo-hi`` or a single one.",
        '"""',
        "",
        f"GO_VERSION = {version!r}",
        "",
        "CATEGORIES: dict[str, str] = {",
        *(f"    {k!r}: {cats[k]!r}," for k in sorted(cats)),
        "}",
        "",
        "SCRIPTS: dict[str, str] = {",
        *(f"    {k!r}: {scripts[k]!r}," for k in sorted(scripts)),
        "}",
        "",
        "CATEGORY_ALIASES: dict[str, str] = {",
        *(f"    {k!r}: {aliases[k]!r}," for k in sorted(aliases)),
        "}",
        "",
    ]
    UNICODE_OUT.write_text("\n".join(lines))
    print(f"wrote {UNICODE_OUT.relative_to(ROOT)}: {len(cats)} categories, {len(scripts)} scripts")


def write_corpus(go: str, workdir: Path, version: str) -> None:
    src = Path(
        subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip()
    )
    rx = src / "src" / "regexp"
    files = [
        *sorted(rx.glob("syntax/*_test.go")),
        *sorted(rx.glob("*_test.go")),
        *sorted(rx.glob("testdata/*.dat")),
        rx / "testdata" / "re2-search.txt",
        rx / "testdata" / "re2-exhaustive.txt.bz2",
    ]
    found: dict[str, str] = {}
    exhaustive = 0
    for line in _go(go, workdir, "extract", *map(str, files)).splitlines():
        row = json.loads(line)
        if row["src"].startswith("re2-exhaustive"):
            # 43k small variations of a few shapes: every third keeps every shape.
            exhaustive += 1
            if exhaustive % 3:
                continue
        found.setdefault(row["p"], row["src"].removesuffix(".txt.bz2"))
    for p in hostile_patterns():
        found.setdefault(p, "hostile")
    # Go strings that are not UTF-8 were dropped by the helper: JSON cannot carry them.
    patterns = list(found)
    stdin = b"".join(json.dumps(p).encode() + b"\n" for p in patterns)
    verdicts = [json.loads(line) for line in _go(go, workdir, "judge", stdin=stdin).splitlines()]
    assert len(verdicts) == len(patterns)
    with CORPUS_OUT.open("w") as out:
        out.write(
            json.dumps({"go": version, "patterns": len(patterns), "row": ["pattern", "source", "go_error"]})
            + "\n"
        )
        for p, v in zip(patterns, verdicts, strict=True):
            # [pattern, where it came from, Go's error or null]
            out.write(json.dumps([p, found[p], None if v["ok"] else v["err"]], ensure_ascii=False) + "\n")
    refused = sum(1 for v in verdicts if not v["ok"])
    print(f"wrote {CORPUS_OUT.relative_to(ROOT)}: {len(patterns)} patterns, {refused} refused by Go")


def fuzz_patterns(seed: int = FUZZ_SEED, count: int = FUZZ_PATTERNS) -> list[str]:
    """``count`` distinct strings of 1 to 8 ``FUZZ_TOKENS``, the same for the same seed."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < count:
        out["".join(rng.choice(FUZZ_TOKENS) for _ in range(rng.randint(1, 8)))] = None
    return list(out)


def write_fuzz(go: str, workdir: Path, version: str) -> None:
    patterns = fuzz_patterns()
    stdin = b"".join(json.dumps(p).encode() + b"\n" for p in patterns)
    verdicts = [json.loads(line) for line in _go(go, workdir, "judge", stdin=stdin).splitlines()]
    with FUZZ_OUT.open("w") as out:
        header = {"go": version, "patterns": len(patterns), "seed": FUZZ_SEED, "row": ["pattern", "go_error"]}
        out.write(json.dumps(header) + "\n")
        for p, v in zip(patterns, verdicts, strict=True):
            out.write(json.dumps([p, None if v["ok"] else v["err"]], ensure_ascii=False) + "\n")
    refused = sum(1 for v in verdicts if not v["ok"])
    print(f"wrote {FUZZ_OUT.relative_to(ROOT)}: {len(patterns)} patterns, {refused} refused by Go")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--go", default=shutil.which("go") or "/usr/local/go/bin/go")
    p.add_argument("--only", choices=["unicode", "corpus", "fuzz"])
    args = p.parse_args()
    if not Path(args.go).exists() and not shutil.which(args.go):
        print(f"gen_go_regex: no Go toolchain at {args.go}; nothing regenerated", file=sys.stderr)
        return 1
    version = subprocess.run([args.go, "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout
    version = version.strip()
    with tempfile.TemporaryDirectory(prefix="gen-go-regex-") as tmp:
        if args.only in (None, "unicode"):
            write_unicode(args.go, Path(tmp), version)
        if args.only in (None, "corpus"):
            write_corpus(args.go, Path(tmp), version)
        if args.only in (None, "fuzz"):
            write_fuzz(args.go, Path(tmp), version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
