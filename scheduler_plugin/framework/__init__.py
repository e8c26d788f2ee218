"""Volcano-style scheduling framework: the Session plugins register with and actions work on,
the Statement allocations are made in, and the extension points."""

from .session import Session
from .statement import Statement

__all__ = ["Session", "Statement"]
