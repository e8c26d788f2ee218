"""The filter layer: kube-scheduler's filter plugins, one module each.

Each filter says, in kube-scheduler's words, why a node cannot take a pod. A filter module holds
what it precomputes of a pod once (kube-scheduler's PreFilter: compiled into
:class:`~.pod_constraints.PodConstraints`), how it judges a node (Filter) and, for a filter whose
verdict depends on the pods already placed on a node, how a tentative placement and its undo
change that (Reserve/Unreserve, :class:`~.plugin.StatefulFilter`). The filters are registered, in
kube-scheduler's order, in :mod:`.registry`; :mod:`.pod_constraints` walks them.

This is the lowest layer of the scheduler: it reads wire objects and :class:`~.nodes.NodeStatic`
only, so the cache, the snapshot and the session's allocation state can all stand on it."""
