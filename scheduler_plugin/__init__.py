"""The hyperplace scheduler: topology-aware gang scheduling, Volcano-compatible.

Layers, each importing only those below it (checked by ``tests/house``; docs/architecture.md):
``runtime`` (the process) -> ``cycle`` (one session, closed into outcomes) -> ``actions`` and
``plugins`` -> ``framework`` (Session, Statement, extension points) -> ``algorithms`` and
``cache`` -> ``model`` and ``config``.
"""
