"""The chaos campaign at scale: ``python -m bench.chaos --seeds 1000`` (see tests/chaos)."""
