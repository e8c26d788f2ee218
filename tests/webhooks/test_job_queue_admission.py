"""The Job webhook checks the queue a Job names, as Volcano's job validation does: it must
exist, be Open and be a leaf queue. Without a queue cache the check is skipped, never guessed."""

from __future__ import annotations

import asyncio
from typing import Any

from hyperplace.api import Queue
from webhooks.admission import AdmissionContext
from webhooks.cache import InformerContext
from webhooks.job import validate_job

from .builders import job


def queue(name: str, state: str | None = "Open", parent: str | None = None) -> Queue:
    body: dict[str, Any] = {"metadata": {"name": name}, "spec": {"weight": 1}}
    if parent:
        body["spec"]["parent"] = parent
    if state:
        body["status"] = {"state": state}
    return Queue.model_validate(body)


def ctx(*queues: Queue) -> AdmissionContext:
    return AdmissionContext(queues={q.name: q for q in queues})


def test_a_job_naming_a_closed_queue_is_refused_naming_spec_queue() -> None:
    v = validate_job(job(queue="shut"), ctx=ctx(queue("shut", "Closed")))
    assert v.messages == [
        "spec.queue: can only submit job to queue with state `Open`, queue `shut` status is `Closed`"
    ]


def test_a_job_naming_a_missing_queue_is_refused() -> None:
    v = validate_job(job(queue="nope"), ctx=ctx(queue("team")))
    assert v.messages == [
        'spec.queue: unable to find job queue: queues.scheduling.volcano.sh "nope" not found'
    ]


def test_open_leaf_queues_and_the_default_queue_are_fine() -> None:
    c = ctx(queue("team"), queue("fresh", state=None))  # no state yet: the controller has not seen it
    assert validate_job(job(queue="team"), ctx=c).allowed
    assert validate_job(job(queue="fresh"), ctx=c).allowed
    assert validate_job(job(queue="default"), ctx=c).allowed  # always there, made up when absent


def test_root_and_parent_queues_take_no_jobs() -> None:
    c = ctx(queue("root"), queue("eng"), queue("eng-a", parent="eng"))
    assert validate_job(job(queue="root"), ctx=c).messages == ["spec.queue: can not submit job to root queue"]
    assert validate_job(job(queue="eng"), ctx=c).messages == [
        "spec.queue: can only submit job to leaf queue, queue `eng` has 1 child queues"
    ]
    assert validate_job(job(queue="eng-a"), ctx=c).allowed


def test_without_a_queue_cache_the_queue_is_not_checked() -> None:
    assert validate_job(job(queue="anything"), ctx=AdmissionContext()).allowed


class FakeInformer:
    def __init__(self) -> None:
        self.store: dict[str, Any] = {}
        self.synced = asyncio.Event()
        self.handlers: list[Any] = []

    def add_handler(self, on_add: Any = None, on_update: Any = None, on_delete: Any = None) -> None:
        self.handlers.append((on_add, on_update, on_delete))


def test_the_server_context_follows_the_watched_queues() -> None:
    queues = FakeInformer()
    source = InformerContext(queues=queues)
    assert source().queues is None  # not synced: unknown, not empty
    queues.store["shut"] = {"metadata": {"name": "shut"}, "spec": {}, "status": {"state": "Closed"}}
    queues.synced.set()
    for on_add, _, _ in queues.handlers:
        on_add(queues.store["shut"])
    got = source().queues
    assert got is not None and got["shut"].status is not None and got["shut"].status.state == "Closed"
