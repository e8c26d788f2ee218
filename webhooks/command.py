"""Queue Commands (``bus.volcano.sh`` Command with a Queue target) and PodGroup status:
admitted only from those allowed to make the change. Pure: the SubjectAccessReview is asked
by the server beforehand (``webhooks.server``) and its answer handed in through the context.

* **Commands.** ``vcctl queue operate --action close`` opens or closes a cluster-scoped Queue
  by creating a Command in the user's own namespace; Volcano obeys any Command, so whoever may
  create Commands anywhere may close every tenant's queue. Here a Command targeting a Queue is
  admitted only when the requester (the AdmissionReview's userInfo: user, groups, uid, extra)
  may ``update`` that Queue (``queues.scheduling.volcano.sh``, by name): opening or closing a
  queue is a change of the queue, which its administrators are granted by ``update`` on
  ``queues`` (``queues/status`` is the controller's own, granted to no person). The mutating
  webhook then marks the Command (``hyperplace.pki.commandmark``) and the controller obeys only
  marked Commands. A Command for anything else (a Job's) is not judged here.
* **PodGroup status.** Volcano's PodGroup CRD has no status subresource, so whoever may update a
  PodGroup may write its status (phase, running counts) too. Here a change of ``status`` (on
  UPDATE; a status other than empty or ``phase: Pending`` on CREATE) is admitted only from the
  identities in ``AdmissionContext.status_writers`` (the scheduler's and the controller's
  ServiceAccounts by default). An update whose status restates the stored one, even without
  fields the client's API type lacks, changes nothing a user could forge and is admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.api.command import QUEUE_ACTIONS, Command
from hyperplace.pki import commandmark

from .context import AdmissionContext, Verdict, as_dict

QUEUE_RESOURCE = "queues.scheduling.volcano.sh"


def command_queue(obj: Mapping[str, Any]) -> str | None:
    """The Queue a Command targets (None: not a queue Command, or not a valid Command)."""
    try:
        return Command.model_validate(obj).target_queue()
    except ValueError:
        return None


def validate_command(obj: Mapping[str, Any], user: str, ctx: AdmissionContext) -> Verdict:
    """Refuse a queue Command from a requester the SubjectAccessReview did not allow."""
    queue = command_queue(obj)
    if queue is None:
        return Verdict()
    access = ctx.command_access
    if access is None:  # authorization turned off (--no-command-authorization): Volcano's way
        return Verdict(warnings=["queue Command not authorised: this webhook runs without authorization"])
    allowed, reason = access
    if allowed:
        return Verdict()
    action = obj.get("action")
    what = action if action in QUEUE_ACTIONS else "a queue Command"
    return Verdict(
        messages=[
            f"target: {what} on queue {queue!r} needs permission to update it: user {user!r} "
            f'cannot update resource "queues" in API group "scheduling.volcano.sh" (name {queue!r})'
            + (f" ({reason})" if reason else "")
        ]
    )


def command_patch(obj: Mapping[str, Any], namespace: str, ctx: AdmissionContext) -> list[dict[str, Any]]:
    """The JSON patch marking an admitted queue Command (empty when nothing to mark)."""
    if command_queue(obj) is None or ctx.command_key is None or ctx.now is None:
        return []
    value = commandmark.sign(ctx.command_key, obj, namespace, ctx.now)
    meta = as_dict(obj.get("metadata"))
    key = commandmark.ANNOTATION.replace("~", "~0").replace("/", "~1")
    if not isinstance(meta.get("annotations"), dict):
        return [{"op": "add", "path": "/metadata/annotations", "value": {commandmark.ANNOTATION: value}}]
    return [{"op": "add", "path": f"/metadata/annotations/{key}", "value": value}]


def _status(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return as_dict((obj or {}).get("status"))


def _restates(new: Any, old: Any) -> bool:
    """Whether ``new`` only restates ``old``, possibly without fields ``old`` has: a client that
    read the PodGroup through an older Volcano API type (the Kubeflow training operator's) sends
    its status back without the fields that type lacks, on every update of the spec."""
    if isinstance(new, Mapping) and isinstance(old, Mapping):
        return all(k in old and _restates(v, old[k]) for k, v in new.items())
    if isinstance(new, list) and isinstance(old, list):
        return len(new) == len(old) and all(_restates(a, b) for a, b in zip(new, old, strict=True))
    return bool(new == old)


def validate_podgroup_status(
    obj: Mapping[str, Any], operation: str, old: Mapping[str, Any] | None, user: str, ctx: AdmissionContext
) -> Verdict:
    """Refuse a PodGroup status change from anyone but ``ctx.status_writers``."""
    writers = ctx.status_writers
    if writers is None or user in writers:
        return Verdict()
    status = _status(obj)
    if operation == "CREATE":
        if not status or status == {"phase": "Pending"}:
            return Verdict()
    elif _restates(status, _status(old)):
        return Verdict()
    who = ", ".join(sorted(writers)) or "nobody"
    return Verdict(
        messages=[
            f"status: a PodGroup's status is written only by the scheduler and the controller ({who}); "
            f"user {user!r} may not set it"
        ]
    )
