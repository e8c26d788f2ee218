"""The real kube-scheduler as the oracle for our filters: for the same pod in the same cluster, the
set of nodes each scheduler finds feasible must be the same (issue 34, item 6)."""
