#!/usr/bin/env python3
"""Convert Volcano's scheduler tests into our conformance cases (issue 37).

    python hack/volcano-conformance.py [--repo /work/.mirror/volcano-sh+volcano/repo] [--ref v1.15.1]

Reads the table-driven tests of the listed action and plugin test files of a Volcano git
checkout or bare mirror at ``--ref`` (tests/conformance/volcano_go.py evaluates their Go
values), and writes one YAML file per table entry under tests/conformance/cases/<file>/,
with the commit it came from. Entries that cannot be converted are written too, with the
reason, so the suite lists them; then rewrites docs/volcano-differences.md from the cases and
tests/conformance/differences.yaml, and the README's conformance line.
tests/conformance/test_volcano_cases.py runs the cases.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conformance.cases import (  # noqa: E402
    SOURCES,
    VOLCANO_REF,
    VOLCANO_REPO,
    convert_all,
    git_source,
    load_cases,
    load_tableless,
    write_cases,
)
from tests.conformance.differences import (  # noqa: E402
    DOC,
    README,
    load_differences,
    render_table,
    status_line,
    with_status,
)


def write_docs() -> None:
    """docs/volcano-differences.md and the README's conformance line, from the cases on disk."""
    cases, differences = load_cases(), load_differences()
    DOC.write_text(render_table(cases, differences, load_tableless()))
    README.write_text(with_status(README.read_text(), status_line(cases, differences)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=VOLCANO_REPO, help="Volcano git directory")
    ap.add_argument("--ref", default=VOLCANO_REF, help="tag or commit to read")
    ap.add_argument(
        "--docs-only",
        action="store_true",
        help="only rewrite docs/volcano-differences.md and the README's line",
    )
    args = ap.parse_args()
    if args.docs_only:
        write_docs()
        return 0
    source, commit = git_source(args.repo, args.ref)
    tableless: dict[str, list[str]] = {}
    cases = convert_all(source, tableless)
    written = write_cases(cases, ref=args.ref, commit=commit, tableless=tableless)
    done = sum(1 for c in cases if not c.reason)
    write_docs()
    print(
        f"{len(cases)} cases from {len(SOURCES)} files at {args.ref} ({commit}): {done} converted, {len(cases) - done} not convertible; {written} files written"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
