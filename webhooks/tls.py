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
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
import tempfile
from pathlib import Path

log = logging.getLogger("hyperplace.webhooks.tls")

DEFAULT_POLL_SECONDS = 10.0


def server_context() -> ssl.SSLContext:
    """A server-side context with the protocol floor Volcano's webhook uses (TLS 1.2)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


class CertReloader:
    """Owns the server's SSLContext and keeps it loaded with the newest valid pair."""

    def __init__(self, cert_file: str | Path, key_file: str | Path, interval: float = DEFAULT_POLL_SECONDS):
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self.context = server_context()
        self.loaded = False  # a pair has been loaded at least once (readiness)
        self.reloads = 0
        self.last_error: str | None = None
        self._digest: bytes | None = None

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
        # Load from private copies of exactly the bytes hashed, so the files changing
        # again between the check and the load cannot mix two pairs.
        with tempfile.TemporaryDirectory(prefix="hyperplace-tls-") as tmp:
            cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            for path, data in ((cert_path, cert), (key_path, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            try:
                server_context().load_cert_chain(cert_path, key_path)
            except (ssl.SSLError, OSError, ValueError) as exc:
                self.last_error = f"certificate pair not loaded: {exc}"
                log.warning(
                    "%s (keeping the previous pair; retrying in %.0f s)", self.last_error, self.interval
                )
                return False
            self.context.load_cert_chain(cert_path, key_path)
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
            except Exception:  # never let the watcher die; the next poll retries
                log.exception("certificate reload failed")
