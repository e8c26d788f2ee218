"""The child process of ``webhooks.regexcheck``: one JSON string (a pattern) per line in,
one JSON object ``{"err": Go's error or null, "rss": bytes}`` per line out.

It imports only ``hyperplace.kube.goregex`` and compiles without caching, so its memory
is what RE2 and malloc keep; the parent recycles it when that grows too large.
"""

from __future__ import annotations

import json
import resource
import sys

from hyperplace.kube.goregex import check_go_regex


def main() -> int:
    """Serve until stdin closes."""
    for line in sys.stdin.buffer:
        try:
            pattern = json.loads(line)
            err = check_go_regex(pattern) if isinstance(pattern, str) else "pattern must be a string"
        except Exception as exc:  # never die on one pattern: report it instead
            err = f"error parsing regexp: {type(exc).__name__}"
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        sys.stdout.write(json.dumps({"err": err, "rss": rss}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
