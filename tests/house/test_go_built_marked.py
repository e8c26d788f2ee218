"""hack/test.sh runs the whole suite in two parts: first, while the real components build, the
tests that need no Go-built binary; then the tests marked ``apiserver`` or ``gobuilt``. A test
that runs such a binary but is not marked would run in the first part and start a second build
beside the background one (correct, as the builds take a lock, but it would wait for it or slow
both down). So every test file outside tests/integration that asks for a built binary carries
the ``gobuilt`` mark, and every file of tests/integration the ``apiserver`` one."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# What a test calls to get a Go-built binary (tests/go_bin.py and its two front doors).
ASKS = ("kube_bin_dir", "helm_bin(", "go_built(")


def test_every_test_that_runs_a_go_built_binary_is_marked() -> None:
    unmarked = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if TESTS / "integration" in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        if any(a in text for a in ASKS) and "mark.gobuilt" not in text:
            unmarked.append(str(path.relative_to(TESTS)))
    assert unmarked == [], f"mark these @pytest.mark.gobuilt: {unmarked}"


def test_every_integration_test_file_is_marked_apiserver() -> None:
    unmarked = [
        p.name
        for p in sorted((TESTS / "integration").glob("test_*.py"))
        if "mark.apiserver" not in p.read_text(encoding="utf-8")
    ]
    assert unmarked == [], f"mark these pytest.mark.apiserver: {unmarked}"
