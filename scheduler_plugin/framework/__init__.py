"""Volcano-style scheduling framework: Session, Statement, plugins and actions."""

from .session import Session
from .statement import Statement

__all__ = ["Session", "Statement"]
