"""Serving TLS that follows certificate rotation without a restart.

aiohttp has no certificate reload (aio-libs/aiohttp#10626), but a listening socket
takes a fresh ``SSL`` object from its ``SSLContext`` for every handshake, so loading the
new pair into the *same* context makes every later connection use it, while open
connections keep theirs. Changes are found by polling a hash of the two files: mounted
Secrets change through a symlink swap that sends no reliable file events (the same
choice as controller-runtime's certwatcher, which polls every 10 s).

A half-rotated pair (new certificate, old key) must not break the live context:
OpenSSL drops a key that does not match a newly loaded certificate, leaving a context
that fails every handshake. So the pair is read once, tried on a scratch context, and
only then loaded into the live one; a bad pair is logged and retried at the next poll.

Renewal: given the CA (``ca_cert_file`` + ``ca_key_file``), the reloader replaces the
serving pair in memory once ``renew_fraction`` (default two-thirds) of its lifetime has
passed: a new key and certificate with the same names and lifetime, signed by the same
CA (so the webhook configurations' ``caBundle`` stays valid), loaded into the live
context like a rotated file. New connections get it, open ones keep theirs. A newer pair
appearing in the mounted files later replaces it as usual. Without the CA key nothing
can be renewed; the expiry is still reported (``expiry_seconds``) and logged when due.

Client certificates (mTLS): ``require_client_certs(ca_file)`` makes every handshake demand a
certificate signed by that CA with the clientAuth usage; a client without one is refused during
the handshake, before it can send a byte of HTTP. Which subjects are accepted is the caller's
check (``webhooks.site`` matches the CN).

TLS 1.2 is limited to ECDHE with AEAD ciphers (AES-GCM, ChaCha20-Poly1305); TLS 1.3
suites are all AEAD.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import os
import ssl
import tempfile
import time
from pathlib import Path

from cryptography import x509

from hyperplace.pki.certificates import RENEW_FRACTION, KeyPair, renew_serving_cert, renewal_due

log = logging.getLogger("hyperplace.pki.tls")

DEFAULT_POLL_SECONDS = 10.0
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
_WARN_EVERY_SECONDS = 3600.0


def server_context() -> ssl.SSLContext:
    """A server-side context with the protocol floor Volcano's webhook uses (TLS 1.2),
    forward-secret AEAD suites only."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    return ctx


class CertReloader:
    """Owns the server's SSLContext and keeps it loaded with the newest valid pair."""

    def __init__(
        self,
        cert_file: str | Path,
        key_file: str | Path,
        interval: float = DEFAULT_POLL_SECONDS,
        *,
        ca_cert_file: str | Path | None = None,
        ca_key_file: str | Path | None = None,
        renew_fraction: float = RENEW_FRACTION,
    ):
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self.ca_cert_file = Path(ca_cert_file) if ca_cert_file else None
        self.ca_key_file = Path(ca_key_file) if ca_key_file else None
        self.renew_fraction = renew_fraction
        self.context = server_context()
        self.loaded = False  # a pair has been loaded at least once (readiness)
        self.reloads = 0
        self.renewals = 0
        self.last_error: str | None = None
        self.certificate: x509.Certificate | None = None  # the one being served
        self._digest: bytes | None = None
        self._warned_at = -_WARN_EVERY_SECONDS
        self.client_ca_file: Path | None = None

    def require_client_certs(self, ca_file: str | Path) -> None:
        """Demand a client certificate signed by the CA in ``ca_file`` on every handshake
        from now on (raises OSError/ssl.SSLError when the file is unreadable or not PEM)."""
        self.context.load_verify_locations(cafile=str(ca_file))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.client_ca_file = Path(ca_file)

    def expiry_seconds(self, now: dt.datetime | None = None) -> float | None:
        """Seconds until the served certificate expires (None before one is loaded)."""
        if self.certificate is None:
            return None
        now = now or dt.datetime.now(dt.UTC)
        return (self.certificate.not_valid_after_utc - now).total_seconds()

    def _load(self, cert: bytes, key: bytes) -> str | None:
        """Load a pair into the live context if it is valid; the error otherwise."""
        # Load from private copies of exactly the bytes given, so the files changing
        # again between the check and the load cannot mix two pairs.
        with tempfile.TemporaryDirectory(prefix="hyperplace-tls-") as tmp:
            cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            for path, data in ((cert_path, cert), (key_path, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            try:
                server_context().load_cert_chain(cert_path, key_path)
                parsed = x509.load_pem_x509_certificate(cert)
            except (ssl.SSLError, OSError, ValueError) as exc:
                return f"certificate pair not loaded: {exc}"
            self.context.load_cert_chain(cert_path, key_path)
        self.certificate = parsed
        return None

    def renew_if_due(self, now: dt.datetime | None = None) -> bool:
        """Replace the served pair with a renewed one once it is due and the CA key is
        at hand. Returns True when renewed."""
        if self.certificate is None or not renewal_due(self.certificate, self.renew_fraction, now):
            return False
        if self.ca_cert_file is None or self.ca_key_file is None or not self.ca_key_file.exists():
            if time.monotonic() - self._warned_at >= _WARN_EVERY_SECONDS:
                self._warned_at = time.monotonic()
                log.warning(
                    "serving certificate expires %s and is due for renewal, but no CA key is "
                    "available to renew it (mount ca.key, or run `hyperplace-certs renew`)",
                    self.certificate.not_valid_after_utc.isoformat(),
                )
            return False
        try:
            ca = KeyPair(self.ca_cert_file.read_bytes(), self.ca_key_file.read_bytes())
            fresh = renew_serving_cert(ca, self.certificate)
        except (OSError, ValueError, TypeError) as exc:
            self.last_error = f"certificate renewal failed: {exc}"
            log.warning("%s", self.last_error)
            return False
        error = self._load(fresh.cert_pem, fresh.key_pem)
        if error is not None:
            self.last_error = f"renewed {error}"
            log.warning("%s", self.last_error)
            return False
        self.renewals += 1
        log.info(
            "serving certificate renewed in memory: valid until %s",
            fresh.certificate.not_valid_after_utc.isoformat(),
        )
        return True

    def reload_if_changed(self) -> bool:
        """Load the files into the context if their content changed and they form a
        valid pair. Returns True when a new pair was loaded."""
        try:
            cert = self.cert_file.read_bytes()
            key = self.key_file.read_bytes()
        except OSError as exc:
            self.last_error = f"cannot read certificate files: {exc}"
            log.warning("%s", self.last_error)
            return False
        digest = hashlib.sha256(hashlib.sha256(cert).digest() + hashlib.sha256(key).digest()).digest()
        if digest == self._digest:
            return False
        error = self._load(cert, key)
        if error is not None:
            self.last_error = error
            log.warning("%s (keeping the previous pair; retrying in %.0f s)", self.last_error, self.interval)
            return False
        self._digest = digest
        self.last_error = None
        if self.loaded:
            self.reloads += 1
            log.info("serving certificate reloaded from %s", self.cert_file)
        self.loaded = True
        return True

    async def watch(self) -> None:
        """Poll forever (cancel the task to stop)."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.reload_if_changed()
                self.renew_if_due()
            except Exception:  # never let the watcher die; the next poll retries
                log.exception("certificate reload failed")
