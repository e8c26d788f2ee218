"""Volcano's ``bus.volcano.sh/v1alpha1`` Command: a one-shot instruction to a controller.

``vcctl queue operate --name q --action close`` creates one in namespace ``default`` (name
``q-closequeue-<random>``) whose ``target`` is a controller reference to the Queue; the queue
controller deletes it and applies the action. The fields match Volcano's CRD
(``config/crd/volcano/bases/bus.volcano.sh_commands.yaml``): ``action``, ``target``,
``reason`` and ``message`` at the top level, no spec and no status.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from .common import OwnerReference, TypedObject
from .constants import (
    BATCH_GROUP,
    BATCH_VERSION,
    BUS_GROUP,
    BUS_VERSION,
    SCHEDULING_GROUP,
    SCHEDULING_VERSION,
)
from .job import ABORT_JOB, COMPLETE_JOB, RESTART_JOB, RESUME_JOB, TERMINATE_JOB

# The queue actions (Volcano's bus/v1alpha1 OpenQueueAction and CloseQueueAction).
OPEN_QUEUE: Final = "OpenQueue"
CLOSE_QUEUE: Final = "CloseQueue"
QUEUE_ACTIONS: Final = (OPEN_QUEUE, CLOSE_QUEUE)
# The job actions a Command may carry (what ``vcctl job suspend|resume|...`` creates).
JOB_ACTIONS: Final = (ABORT_JOB, RESUME_JOB, RESTART_JOB, TERMINATE_JOB, COMPLETE_JOB)


class Command(TypedObject):
    """Command defines command structure."""

    api_version: str = f"{BUS_GROUP}/{BUS_VERSION}"
    kind: str = "Command"
    action: str | None = Field(
        default=None, description="Action defines the action that will be took to the target object."
    )
    target: OwnerReference | None = Field(
        default=None, description="TargetObject defines the target object of this command."
    )
    reason: str | None = Field(
        default=None, description="Unique, one-word, CamelCase reason for this command."
    )
    message: str | None = Field(
        default=None, description="Human-readable message indicating details of this command."
    )

    def target_queue(self) -> str | None:
        """The name of the Queue this command targets, or None when it targets something else
        (Volcano's IsQueueReference: apiVersion ``scheduling.volcano.sh/v1beta1``, kind Queue)."""
        t = self.target
        if t is None or t.api_version != f"{SCHEDULING_GROUP}/{SCHEDULING_VERSION}" or t.kind != "Queue":
            return None
        return t.name

    def target_job(self) -> str | None:
        """The name of the Volcano Job this command targets (in the Command's own namespace, as
        Volcano reads it), or None when it targets something else."""
        t = self.target
        if t is None or t.api_version != f"{BATCH_GROUP}/{BATCH_VERSION}" or t.kind != "Job":
            return None
        return t.name
