"""Suite-wide settings."""

from __future__ import annotations

import os

# The scheduler and the simulator keep their cluster state incrementally; in tests every
# cycle also rebuilds it from scratch and fails loudly on any difference (--verify-state).
os.environ.setdefault("HYPERPLACE_VERIFY_STATE", "1")
