"""Webhook PKI shared by ``hyperplace-certs`` and ``hyperplace-webhooks``: the CA and serving
certificate (generation, symlink-safe writing, renewal) and the caBundle injection into webhook
configurations."""
