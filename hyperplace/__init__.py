"""Shared foundation of the hyperplace suite: API models (``hyperplace.api``) and
Kubernetes helpers (``hyperplace.kube``) used by the webhooks, controllers,
scheduler and simulator. This package imports none of them."""

__version__ = "0.1.0"
