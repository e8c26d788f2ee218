"""Controllers: Volcano's Job, PodGroup, HyperNode and queue controllers.

One package per controller: a pure reconcile (``job.reconcile``, ``podgroup.build``,
``hypernode.status`` and ``hypernode.discovery``, ``queue.status`` and ``queue.command``; the
simulator calls them directly) and a thin ``sync`` module that applies it against an API
(``job.sync``, ``podgroup.sync``, ``hypernode.sync`` and ``hypernode.discovery_sync``,
``queue.sync`` and ``queue.command_sync``). What the sync modules share is ``kube_io``;
``manager`` wires them to the informers and runs their workers, on the async runtime in
``hyperplace.runtime`` (shared with the webhooks and the scheduler).
"""
