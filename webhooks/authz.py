"""Asking the apiserver whether a requester may update a Queue: one SubjectAccessReview per
queue Command, with the user, groups, uid and extra of the AdmissionReview's userInfo. A thin
adapter over kubernetes-asyncio; the verdict's use is ``webhooks.command``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.api.constants import SCHEDULING_GROUP


def queue_access_review(user_info: Mapping[str, Any], queue: str) -> dict[str, Any]:
    """The SubjectAccessReview body: may this user ``update`` the Queue ``queue``?"""
    extra = user_info.get("extra")
    groups = user_info.get("groups")
    spec: dict[str, Any] = {
        "user": str(user_info.get("username") or ""),
        "groups": [str(g) for g in groups] if isinstance(groups, list) else [],
        "resourceAttributes": {
            "group": SCHEDULING_GROUP,
            "resource": "queues",
            "verb": "update",
            "name": queue,
        },
    }
    if user_info.get("uid"):
        spec["uid"] = str(user_info["uid"])
    if isinstance(extra, Mapping):
        spec["extra"] = {str(k): [str(v) for v in vs] for k, vs in extra.items() if isinstance(vs, list)}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


class SubjectAccessReviewer:
    """``authorize(user_info, queue) -> (allowed, reason)`` through the apiserver. An API error
    is a refusal saying so (the Command is refused, never let through unchecked)."""

    def __init__(self, api_client: Any):
        self.api_client = api_client

    async def authorize(self, user_info: Mapping[str, Any], queue: str) -> tuple[bool, str]:
        # lazy: kubernetes-asyncio is loaded only by a webhook that talks to an apiserver
        from kubernetes_asyncio import client

        api = client.AuthorizationV1Api(self.api_client)
        try:
            out = await api.create_subject_access_review(queue_access_review(user_info, queue))  # type: ignore[arg-type]
        except Exception as exc:  # the apiserver's answer is the only one we trust
            return False, f"the permission could not be checked: {type(exc).__name__}: {exc}"[:300]
        status = out.status
        allowed = bool(status and status.allowed and not status.denied)
        reason = (status.reason or "") if status else ""
        return allowed, reason
