"""The child process of ``webhooks.regexcheck``: one JSON list of patterns per line in; for
each pattern, as soon as it is compiled, one JSON object ``{"err": Go's error or null,
"rss": resident bytes}`` per line out. The first line out, ``{"ready": true}``, says the
imports are done, so start-up time is never charged to a request.

It imports only ``hyperplace.kube.goregex`` and compiles without caching, so its memory
is what RE2 and malloc keep; the parent recycles it when that grows too large.
"""

from __future__ import annotations

import json
import os
import sys

from hyperplace.kube.goregex import check_go_regex


def _rss() -> int:
    # Current resident size; ru_maxrss would report the parent's peak from before exec.
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def main() -> int:
    """Serve until stdin closes (after one ``{"ready": true}`` line once imported)."""
    sys.stdout.write('{"ready": true}\n')
    sys.stdout.flush()
    for line in sys.stdin.buffer:
        patterns = json.loads(line)
        for pattern in patterns if isinstance(patterns, list) else [patterns]:
            try:
                err = check_go_regex(pattern) if isinstance(pattern, str) else "pattern must be a string"
            except Exception as exc:  # never die on one pattern: report it instead
                err = f"error parsing regexp: {type(exc).__name__}"
            rss = _rss()
            sys.stdout.write(json.dumps({"err": err, "rss": rss}) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
