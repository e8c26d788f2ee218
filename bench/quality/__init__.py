"""Placement quality and scale benchmarks (issue 5); run ``python -m bench.quality``.

Modules: ``model`` (array model), ``metrics``, ``generators``, ``optimum`` (MILP and
exhaustive oracle), ``schedulers`` (adapter interface and baselines), ``ours`` (our
scheduler via its contract), ``wire`` (wire-format objects), ``exact``/``sim``/``scale``
(the three harnesses), ``report`` (tables and plots).
"""
