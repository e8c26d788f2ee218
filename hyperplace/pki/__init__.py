"""Webhook PKI shared by ``hyperplace-certs`` and ``hyperplace-webhooks``: the CA and serving
certificate (generation, symlink-safe writing, renewal) and the caBundle injection into webhook
configurations, and the serving TLS context that follows rotation and renewal
(``hyperplace.pki.tls``, used by the webhooks and by the metrics endpoints)."""
