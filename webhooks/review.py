"""AdmissionReview (``admission.k8s.io/v1``) in and out, independent of any HTTP server.

``handle_review(path, body, ctx)`` is the whole webhook behind one URL path: it parses
and checks the request, runs the webhook, and returns the HTTP status and JSON body to
send. The aiohttp server (``webhooks.server``) is a thin shell around it, and an
integration test against a real kube-apiserver can mount the same function elsewhere.

Contract:

* A malformed request (not JSON, nested deeper than ``MAX_JSON_DEPTH``, not an
  ``admission.k8s.io/v1`` AdmissionReview, no ``request``, no ``request.uid``, no object
  to review) is HTTP 400 with a plain message: there is no uid to answer, so no
  AdmissionReview can be built. Nesting is measured before parsing, so no body can make
  the parser recurse out of stack.
* A valid request always gets HTTP 200 and an AdmissionReview echoing ``request.uid``:
  ``allowed``, on refusal ``status: {code: 403, message}``, ``warnings``, and for
  mutations ``patchType: JSONPatch`` with the base64 JSON patch. If the webhook itself
  fails, the answer is a refusal with ``code: 500`` and an internal-error message (the
  exception is logged), so a bug can never admit an object unchecked.
* Nothing here raises, whatever the body: ``handle_review`` (and the two halves the
  server calls, ``prepare_review`` and ``answer_review``) return a result for every
  input, so the server never answers 5xx.
* ``request.dryRun`` changes nothing: these webhooks have no side effects (their
  configurations say ``sideEffects: None``), so a dry run gets exactly the real answer.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .command import command_patch, validate_command, validate_podgroup_status
from .context import AdmissionContext, Verdict
from .hypernode import validate_hypernode
from .job import job_patch, validate_job
from .pod import pod_patch

log = logging.getLogger("hyperplace.webhooks")

API_VERSION = "admission.k8s.io/v1"
MAX_BODY_BYTES = 3 * 1024 * 1024  # the apiserver's own request limit for admission
DENIED_CODE = 403  # what the apiserver reports for a webhook denial without a code
INTERNAL_ERROR_CODE = 500
# An AdmissionReview of the deepest Kubernetes object (a pod template's affinity terms
# inside a Job task) nests under 20 levels; 100 leaves room for free-form fields while
# keeping every recursive step downstream (parsing, copying, validation) far from the stack.
MAX_JSON_DEPTH = 100


class BadReview(ValueError):
    """A request that is not a usable AdmissionReview; ``str()`` says why."""


@dataclass(frozen=True)
class ReviewRequest:
    """The parts of ``AdmissionReview.request`` the webhooks use."""

    uid: str
    operation: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    namespace: str | None = None
    kind: Mapping[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    # The requester (username, uid, groups, extra), for the checks of who may do what.
    user_info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def username(self) -> str:
        return str(self.user_info.get("username") or "")


@dataclass
class Answer:
    """A webhook's answer before it is wrapped in an AdmissionReview."""

    allowed: bool
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] = field(default_factory=list)
    code: int = DENIED_CODE

    @property
    def verdict(self) -> str:
        """``allowed``, ``denied`` or ``error``: the metrics label."""
        if self.allowed:
            return "allowed"
        return "error" if self.code == INTERNAL_ERROR_CODE else "denied"


_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1


def json_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep ``body`` nests arrays and objects (brackets inside strings do not count),
    exactly when above ``limit``; at or below it, possibly an upper bound.

    Cheap and non-recursive, so it can run before ``json.loads``: a body with at most
    ``limit`` opening brackets is answered by counting them, others in vectorised passes
    (numpy releases the GIL, so a large body does not stall the event loop): a quote
    preceded by an even run of backslashes opens or closes a string, and only brackets
    outside strings count. For a body that is not JSON the count is only an estimate.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return min(limit, body.count(b"[") + body.count(b"{"))
    arr = np.frombuffer(body, np.uint8)
    brackets = np.flatnonzero(_BRACKET_STEP[arr])
    quotes = np.flatnonzero(arr == _QUOTE)
    if quotes.size and body.find(b"\\") >= 0:
        # A quote is escaped when an odd run of backslashes precedes it.
        idx = np.arange(arr.size, dtype=np.int32)
        last_plain = np.maximum.accumulate(np.where(arr != _BACKSLASH, idx, -1).astype(np.int32))
        before = np.maximum(quotes - 1, 0)
        run = np.where(quotes > 0, quotes - 1 - last_plain[before], 0)
        quotes = quotes[run % 2 == 0]
    # A bracket is inside a string when an odd number of real quotes precede it.
    outside = np.searchsorted(quotes, brackets) % 2 == 0
    steps = _BRACKET_STEP[arr[brackets[outside]]].astype(np.int32)
    return int(np.cumsum(steps).max()) if steps.size else 0


def parse_review(body: bytes) -> ReviewRequest:
    """Parse and check an AdmissionReview request body; raises BadReview."""
    if len(body) > MAX_BODY_BYTES:
        raise BadReview(f"request body is {len(body)} bytes; the limit is {MAX_BODY_BYTES}")
    depth = json_depth(body)
    if depth > MAX_JSON_DEPTH:
        raise BadReview(
            f"request body nests {depth} levels deep; the limit is {MAX_JSON_DEPTH} "
            "(no Kubernetes object comes near it)"
        )
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadReview(f"request body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadReview("request body must be a JSON object (an AdmissionReview)")
    if doc.get("kind") != "AdmissionReview":
        raise BadReview(f"kind must be AdmissionReview, got {doc.get('kind')!r}")
    if doc.get("apiVersion") != API_VERSION:
        raise BadReview(
            f"apiVersion must be {API_VERSION} (the only version served), got {doc.get('apiVersion')!r}"
        )
    req = doc.get("request")
    if not isinstance(req, dict):
        raise BadReview("AdmissionReview.request is missing or not an object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview.request.uid is missing or empty")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise BadReview(f"request.operation must be CREATE, UPDATE, DELETE or CONNECT, got {operation!r}")
    obj = req.get("object")
    old = req.get("oldObject")
    if obj is not None and not isinstance(obj, dict):
        raise BadReview("request.object must be an object")
    if old is not None and not isinstance(old, dict):
        raise BadReview("request.oldObject must be an object")
    if obj is None and operation in ("CREATE", "UPDATE"):
        raise BadReview(f"request.object is required for {operation}")
    kind = req.get("kind")
    namespace = req.get("namespace")
    return ReviewRequest(
        uid=uid,
        operation=operation,
        object=obj,
        old_object=old,
        namespace=namespace if isinstance(namespace, str) and namespace else None,
        kind=kind if isinstance(kind, dict) else {},
        dry_run=req.get("dryRun") is True,
        user_info=req["userInfo"] if isinstance(req.get("userInfo"), dict) else {},
    )


def _from_verdict(v: Verdict) -> Answer:
    return Answer(allowed=v.allowed, messages=v.messages, warnings=v.warnings)


def _kind_is(req: ReviewRequest, kind: str, group: str) -> bool:
    obj = req.object or req.old_object or {}
    api_version = str(obj.get("apiVersion", ""))
    obj_group = api_version.rpartition("/")[0] if "/" in api_version else ""
    return obj.get("kind") == kind and obj_group == group


def _wrong_kind(req: ReviewRequest, want: str) -> Answer:
    obj = req.object or req.old_object or {}
    # Allowed: a mis-scoped webhook configuration must not block unrelated objects.
    return Answer(
        allowed=True,
        warnings=[f"webhook for {want} received {obj.get('apiVersion')}/{obj.get('kind')}; not checked"],
    )


def _validate_hypernodes(req: ReviewRequest, ctx: AdmissionContext) -> Answer:
    if not _kind_is(req, "HyperNode", "topology.volcano.sh"):
        return _wrong_kind(req, "topology.volcano.sh HyperNode")
    return _from_verdict(validate_hypernode(req.object or {}, req.operation, req.old_object, ctx))


def _validate_jobs(req: ReviewRequest, ctx: AdmissionContext) -> Answer:
    if not _kind_is(req, "Job", "batch.volcano.sh"):
        return _wrong_kind(req, "batch.volcano.sh Job")
    return _from_verdict(validate_job(req.object or {}, req.operation, req.old_object, ctx))


def _mutate_jobs(req: ReviewRequest, ctx: AdmissionContext) -> Answer:
    if not _kind_is(req, "Job", "batch.volcano.sh"):
        return _wrong_kind(req, "batch.volcano.sh Job")
    return Answer(allowed=True, patch=job_patch(req.object or {}, req.operation))


def _mutate_pods(req: ReviewRequest, ctx: AdmissionContext) -> Answer:
    if not _kind_is(req, "Pod", ""):
        return _wrong_kind(req, "core Pod")
    return Answer(allowed=True, patch=pod_patch(req.object or {}, req.operation, ctx, req.namespace))


def _validate_commands(req: ReviewRequest, ctx: AdmissionContext) -> Answer:
    if not _kind_is(req, "Command", "bus.volcano.sh"):
        return _wrong_kind(req, "bus.volcano.sh Command")
    return _from_verdict(validate_command(req.object or {}, req.username, ctx))


def _mutate_commands(req: ReviewRequest, ctx: AdmissionContext) -> Answer:
    if not _kind_is(req, "Command", "bus.volcano.sh"):
        return _wrong_kind(req, "bus.volcano.sh Command")
    verdict = validate_command(req.object or {}, req.username, ctx)
    if not verdict.allowed:  # never mark what the validating webhook would refuse
        return _from_verdict(verdict)
    return Answer(
        allowed=True,
        warnings=verdict.warnings,
        patch=command_patch(req.object or {}, req.namespace or "", ctx),
    )


def _validate_podgroups(req: ReviewRequest, ctx: AdmissionContext) -> Answer:
    if not _kind_is(req, "PodGroup", "scheduling.volcano.sh"):
        return _wrong_kind(req, "scheduling.volcano.sh PodGroup")
    return _from_verdict(
        validate_podgroup_status(req.object or {}, req.operation, req.old_object, req.username, ctx)
    )


Webhook = Callable[[ReviewRequest, AdmissionContext], Answer]

# URL path -> webhook; the paths Volcano's webhook-manager serves.
WEBHOOKS: dict[str, Webhook] = {
    "/hypernodes/validate": _validate_hypernodes,
    "/jobs/validate": _validate_jobs,
    "/jobs/mutate": _mutate_jobs,
    "/pods/mutate": _mutate_pods,
    "/commands/validate": _validate_commands,
    "/commands/mutate": _mutate_commands,
    "/podgroups/validate": _validate_podgroups,
}


def review_response(uid: str, answer: Answer) -> dict[str, Any]:
    """The AdmissionReview (v1) to return for ``answer``."""
    response: dict[str, Any] = {"uid": uid, "allowed": answer.allowed}
    if not answer.allowed:
        response["status"] = {
            "code": answer.code,
            "message": "; ".join(answer.messages) or "denied",
        }
    if answer.warnings:
        response["warnings"] = answer.warnings
    if answer.allowed and answer.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(
            json.dumps(answer.patch, separators=(",", ":")).encode()
        ).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


@dataclass
class ReviewResult:
    """What to send back: HTTP status, body (JSON object or plain text) and the verdict."""

    status: int
    body: dict[str, Any] | str
    verdict: str

    @property
    def code(self) -> int:
        """The code the metrics count: the HTTP status of a bad request, else the
        AdmissionReview's (200 allowed, 403 denied, 500 a webhook failure)."""
        if isinstance(self.body, str):
            return self.status
        response = self.body.get("response", {})
        return 200 if response.get("allowed") else int(response.get("status", {}).get("code", DENIED_CODE))


def prepare_review(path: str, body: bytes) -> ReviewRequest | ReviewResult:
    """Parse ``body`` for the webhook at ``path``: the request, or the 400/404 result to
    send instead. Never raises."""
    if path not in WEBHOOKS:
        return ReviewResult(404, f"no webhook at {path}", "bad_request")
    try:
        return parse_review(body)
    except BadReview as exc:
        return ReviewResult(400, str(exc), "bad_request")
    except Exception as exc:  # a parser bug must still be an answer, not a 500
        log.exception("could not parse a request to %s", path)
        return ReviewResult(400, f"request body could not be read: {type(exc).__name__}", "bad_request")


def handle_review(path: str, body: bytes, ctx: AdmissionContext | None = None) -> ReviewResult:
    """Run the webhook mounted at ``path`` on one AdmissionReview request body.

    Never raises: malformed input is a 400 result, a webhook failure a 200 refusal.
    """
    req = prepare_review(path, body)
    if isinstance(req, ReviewResult):
        return req
    return answer_review(path, req, ctx)


def answer_review(path: str, req: ReviewRequest, ctx: AdmissionContext | None = None) -> ReviewResult:
    """Run the webhook at ``path`` on a parsed request (from ``prepare_review``). Never raises."""
    webhook = WEBHOOKS[path]
    try:
        # None of these webhooks judges deletions or connections (their configurations do
        # not ask for them); answer without looking, whatever the object.
        if req.operation in ("DELETE", "CONNECT"):
            answer = Answer(allowed=True)
        else:
            answer = webhook(req, ctx or AdmissionContext())
    except Exception:  # RecursionError and MemoryError included
        log.exception("webhook %s failed on request %s", path, req.uid)
        answer = Answer(
            allowed=False,
            messages=[
                f"internal error in webhook {path}; the request was not checked (see the webhook's log)"
            ],
            code=INTERNAL_ERROR_CODE,
        )
    if req.dry_run:
        log.debug("dry-run request %s on %s", req.uid, path)
    try:
        body = review_response(req.uid, answer)
    except Exception:  # e.g. a patch that cannot be serialised: still an answer
        log.exception("webhook %s could not encode its answer to %s", path, req.uid)
        answer = Answer(
            allowed=False, messages=[f"internal error in webhook {path}"], code=INTERNAL_ERROR_CODE
        )
        body = review_response(req.uid, answer)
    return ReviewResult(200, body, answer.verdict)
