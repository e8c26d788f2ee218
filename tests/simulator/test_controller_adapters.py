"""The simulator runs every controller adapter it has: each module of ``simulator/controllers``
holds one adapter, listed once in ``CONTROLLERS`` (an adapter left out would silently never run)."""

from __future__ import annotations

import pkgutil

import simulator.controllers as controllers_pkg
from simulator.controllers import CONTROLLERS


def test_every_adapter_module_is_in_the_list_once() -> None:
    listed = {c.__module__ for c in CONTROLLERS}
    assert len(listed) == len(CONTROLLERS)
    modules = {
        f"{controllers_pkg.__name__}.{info.name}" for info in pkgutil.iter_modules(controllers_pkg.__path__)
    }
    assert modules == listed


def test_every_adapter_reconciles_in_one_step() -> None:
    for adapter in CONTROLLERS:
        assert callable(getattr(adapter, "reconcile", None)), f"{adapter.__name__} has no reconcile()"
