"""The webhook server's serving TLS: :mod:`hyperplace.pki.tls` (shared with the controller's and
scheduler's metrics endpoints), re-exported under its old name."""

from hyperplace.pki.tls import DEFAULT_POLL_SECONDS, TLS12_CIPHERS, CertReloader, server_context

__all__ = ["DEFAULT_POLL_SECONDS", "TLS12_CIPHERS", "CertReloader", "server_context"]
