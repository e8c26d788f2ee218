"""Which queue Commands to apply and which to drop: pure, no I/O.

``vcctl queue operate --name q --action close|open`` creates a ``bus.volcano.sh/v1alpha1``
Command whose ``target`` is a controller reference to the Queue (apiVersion
``scheduling.volcano.sh/v1beta1``, kind ``Queue``). Volcano's queue controller serves the
Commands with such a target and no others (Job Commands belong to the job controller), deletes
each before acting on it, so a command is applied at most once, and then applies its action.

Volcano drops a Command for a queue that no longer exists (a log line at verbosity 4) and turns
an unknown action into a plain sync (silently). Here both are dropped too, each with a log line
at warning level saying why, as is a CloseQueue for the ``root`` queue (Volcano: "Root queue
cannot be closed"). The target's ``uid`` is not compared with the queue's, as in Volcano: a
Command names its queue by name.

Unlike Volcano, a Command is obeyed only when the admission webhook admitted it: the webhook asks
the apiserver whether the Command's creator may update the target Queue and marks the Command it
admits (``hyperplace.pki.commandmark``); a Command without a valid marker (the webhook disabled
or bypassed, the marker forged, replayed or moved to another queue or action) is deleted without
effect, its reason logged. ``hyperplace-controller --accept-unadmitted-commands`` restores
Volcano's behaviour (any Command is obeyed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hyperplace.api.command import CLOSE_QUEUE, QUEUE_ACTIONS, Command

ROOT_QUEUE = "root"


@dataclass(frozen=True)
class Verdict:
    """What to do with one queue Command once it is deleted: apply ``action`` to ``queue``,
    or, when ``reason`` is set, nothing (the reason is logged)."""

    queue: str
    action: str
    reason: str | None = None

    @property
    def dropped(self) -> bool:
        return self.reason is not None


def judge(
    cmd: Command, queue_exists: Callable[[str], bool], not_admitted: str | None = None
) -> Verdict | None:
    """The verdict on ``cmd``; None when it does not target a Queue (not ours to serve).
    ``not_admitted``: why the Command's admission marker is not valid (None: it is, or the
    controller accepts unadmitted Commands)."""
    queue = cmd.target_queue()
    if queue is None:
        return None
    action = cmd.action or ""
    if not_admitted is not None:
        return Verdict(queue, action, f"not admitted: {not_admitted}")
    if action not in QUEUE_ACTIONS:
        known = " or ".join(QUEUE_ACTIONS)
        return Verdict(queue, action, f"action {action!r} is not a queue action (use {known})")
    if not queue_exists(queue):
        return Verdict(queue, action, f'queues.scheduling.volcano.sh "{queue}" not found')
    if action == CLOSE_QUEUE and queue == ROOT_QUEUE:
        return Verdict(queue, action, "the root queue cannot be closed")
    return Verdict(queue, action)
