"""The admission marker on queue Commands: proof that the webhook admitted a Command, which the
controller checks before obeying it, so disabling or bypassing the webhook does not reopen the
hole a permissive Command handler is (any user who may create Commands could close any queue).

The mutating webhook, after a SubjectAccessReview said the requester may update the target
Queue, sets the annotation ``hyperplace.io/command-admission`` to
``v1.<issued unix seconds>.<nonce>.<HMAC-SHA256 hex>``. The MAC, keyed by a secret only the
webhook and the controller read (a Secret both mount), covers the namespace, the action, the
target (apiVersion, kind, name), the issue time and a random nonce, so:

* a user cannot forge it (no key), nor move it to another action or queue (covered fields);
* the controller accepts it only within ``MAX_AGE_SECONDS`` of the Command's
  ``creationTimestamp`` (set by the apiserver, not the user), and each nonce once per
  controller process: a copied annotation replayed later is ignored. Within those seconds, a
  user who can read an admitted Command's namespace could repeat its very action on its very
  queue once after the controller restarted, which changes nothing the queue's admin did not
  ask for. The Command's name is not covered: with ``generateName`` the name is not known
  yet when the mutating webhook runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

ANNOTATION = "hyperplace.io/command-admission"
VERSION = "v1"
MAX_AGE_SECONDS = 300
MIN_KEY_BYTES = 16


def load_key(text: bytes) -> bytes:
    """The key in a key file (surrounding whitespace ignored); ValueError when too short."""
    key = text.strip()
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the command key must hold at least {MIN_KEY_BYTES} bytes, got {len(key)}")
    return key


def _target(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    target = obj.get("target")
    return target if isinstance(target, Mapping) else {}


def _mac(key: bytes, obj: Mapping[str, Any], namespace: str, issued: int, nonce: str) -> str:
    t = _target(obj)
    fields = [
        VERSION,
        namespace,
        str(obj.get("action") or ""),
        str(t.get("apiVersion") or ""),
        str(t.get("kind") or ""),
        str(t.get("name") or ""),
        str(issued),
        nonce,
    ]
    return hmac.new(key, "\n".join(fields).encode(), hashlib.sha256).hexdigest()


def sign(key: bytes, obj: Mapping[str, Any], namespace: str, now: float) -> str:
    """The annotation value marking ``obj`` (a Command in ``namespace``) admitted at ``now``."""
    issued = int(now)
    nonce = secrets.token_hex(12)
    return f"{VERSION}.{issued}.{nonce}.{_mac(key, obj, namespace, issued, nonce)}"


def _created(obj: Mapping[str, Any]) -> float | None:
    meta = obj.get("metadata")
    stamp = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    if not isinstance(stamp, str):
        return None
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def nonce_of(obj: Mapping[str, Any]) -> tuple[str, int] | None:
    """The (nonce, issue time) of the marker on ``obj``, if it has a well-formed one."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(ANNOTATION) if isinstance(annotations, Mapping) else None
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) != 4 or not parts[1].isdigit():
        return None
    return parts[2], int(parts[1])


class NonceLog:
    """The nonces of markers already obeyed, kept as long as such a marker could still be
    fresh (twice ``MAX_AGE_SECONDS``), so the log stays small."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def use(self, nonce: str, issued: int) -> bool:
        """Record ``nonce``; False when it was recorded before."""
        if nonce in self._seen:
            return False
        horizon = issued - 2 * MAX_AGE_SECONDS
        if len(self._seen) > 1024:
            self._seen = {n: t for n, t in self._seen.items() if t >= horizon}
        self._seen[nonce] = issued
        return True


def verify(key: bytes, obj: Mapping[str, Any], seen: NonceLog | None = None) -> str | None:
    """None when ``obj`` (a Command as stored) carries a valid, fresh, unused marker; else why
    not. With ``seen``, the marker's nonce is recorded there (and a nonce already in it refused)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    annotations = meta.get("annotations")
    value = annotations.get(ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(value, str):
        return f"no {ANNOTATION} annotation: the admission webhook did not admit it"
    parts = value.split(".")
    if len(parts) != 4 or parts[0] != VERSION or not parts[1].isdigit():
        return f"malformed {ANNOTATION} annotation"
    _, issued_text, nonce, mac = parts
    issued = int(issued_text)
    namespace = str(meta.get("namespace") or "")
    if not hmac.compare_digest(mac, _mac(key, obj, namespace, issued, nonce)):
        return f"{ANNOTATION} does not match this Command (forged, or its action or target changed)"
    created = _created(obj)
    if created is None or abs(created - issued) > MAX_AGE_SECONDS:
        return (
            f"{ANNOTATION} was issued for another Command (more than {MAX_AGE_SECONDS} s from its creation)"
        )
    if seen is not None and not seen.use(nonce, issued):
        return f"{ANNOTATION} was used already (a replayed Command)"
    return None
