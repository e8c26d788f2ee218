"""Controllers: the Volcano Job controller and the HyperNode controller.

Pure reconcile logic lives in ``controller.job.reconcile``, ``controller.hypernode.status``
and ``controller.hypernode.discovery`` (the simulator calls them directly); the async
runtime in ``hyperplace.runtime`` (shared with the webhooks and the scheduler) and ``controller.manager`` drives them against an API.
"""
