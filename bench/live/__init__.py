"""The pieces of the benchmarks on the real local control plane (``bench/e2e_bind.py``,
``bench/job_stream.py``): the cluster they create (:mod:`.cluster`), the gang as each workload kind
(:mod:`.gangs`), the local-up processes they restart, time and wait for (:mod:`.processes`), the
scheduler's profile (:mod:`.profiler`), the apiserver's and the scheduler's metrics
(:mod:`.metrics`) and one measured variant with its report (:mod:`.measure`)."""

from __future__ import annotations

import sys


def say(msg: str) -> None:
    """One line of progress on stderr."""
    print(f"e2e_bind: {msg}", file=sys.stderr, flush=True)
