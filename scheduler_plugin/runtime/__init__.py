"""The scheduler process around the pure core: informers, the cycle loop, binding, status.

:class:`~scheduler_plugin.runtime.scheduler.Scheduler` is the entry point; see its module
docstring for the cycle and the crash-safety argument.
"""
