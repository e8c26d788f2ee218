"""One scheduling cycle: run a session on a snapshot and close it into outcomes.

The scheduler's public contract (docs/CONTRACTS.md): :func:`run_session` and what it returns.
"""

from .result import JobOutcome, QueueOutcome, SessionResult, reason_parts
from .run import LastSession, open_session, run_session, run_session_reusing

__all__ = [
    "JobOutcome",
    "LastSession",
    "QueueOutcome",
    "SessionResult",
    "open_session",
    "reason_parts",
    "run_session",
    "run_session_reusing",
]
