"""Tests against a real kube-apiserver + etcd (hack/control-plane.py)."""
