"""The traced example behind the large-job rows: one quick trace through ours and the Volcano
algorithm, the large job at ours' p95 and what started while it waited."""

from __future__ import annotations

import pytest

from bench.quality.trace_wait import main


def test_the_large_job_at_ours_p95_is_traced_against_the_volcano_algorithm(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--quick", "--seed", "1", "--trace", "limits"]) == 0
    out = capsys.readouterr().out
    assert "seed 1, limits trace" in out
    assert "at ours' p95:" in out and "while it waited:" in out
    assert "hyperplace, while it waited" in out and "volcano-algorithm, while it waited" in out
