"""The scheduler's CPU profile during a run: py-spy samples, summed per function and per
category of the scheduler's work."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.live import say


class Profiler:
    """py-spy sampling one process (non-blocking) into collapsed stacks."""

    def __init__(self, pid: int, out: Path) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.out = out
        self.proc: subprocess.Popen[bytes] | None = None
        if Path(exe).exists():
            self.proc = subprocess.Popen(
                [
                    exe,
                    "record",
                    "--pid",
                    str(pid),
                    "--rate",
                    "200",
                    "--format",
                    "raw",
                    "--nonblocking",
                    "--threads",
                    "-o",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        else:
            say("py-spy is not installed (pip install py-spy): no profile")

    def stop(self) -> str:
        if self.proc is None:
            return ""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return summarize_profile(self.out)


CATEGORIES = [
    (
        "session (decision)",
        (
            "run_session",
            "scheduler_plugin/framework",
            "scheduler_plugin/actions",
            "scheduler_plugin/plugins",
            "scheduler_plugin/algorithms",
            "scheduler_plugin/cycle",
        ),
    ),
    ("snapshot / cluster state", ("scheduler_plugin/cache", "scheduler_plugin/model")),
    ("JSON encode/decode", ("json/", "sanitize_for_serialization")),
    ("TLS / socket", ("ssl.py", "selector_events.py", "sslproto.py")),
    ("HTTP client (aiohttp)", ("aiohttp/",)),
    ("informer events", ("informer.py",)),
    ("status / events writing", ("runtime/status.py", "runtime/events.py", "runtime/reporter.py")),
    ("bind path", ("runtime/binder.py", "assume.py", "_apply")),
]


def summarize_profile(path: Path, top: int = 12) -> str:
    """Self time per function and time per category (a sample counts once per category)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return "(no profile written)"
    self_time: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        self_time[frames[-1]] += n
        for cat, needles in CATEGORIES:
            if any(nd in f for f in frames for nd in needles):
                cats[cat] += n
    if not total:
        return "(no samples)"
    out = [f"scheduler CPU samples: {total} (200/s while running)", "by category (inclusive):"]
    out += [f"  {c:<28} {100 * cats[c] / total:5.1f} %" for c, _ in CATEGORIES]
    out.append("top self time:")
    out += [f"  {100 * n / total:5.1f} %  {f[:110]}" for f, n in self_time.most_common(top)]
    return "\n".join(out)
